package analyze

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strconv"
)

// writeServer prints the server section (nothing without a sidecar).
func (s *Summary) writeServer(b *bufio.Writer) {
	r := s.Server
	if r == nil {
		return
	}
	fmt.Fprintln(b, center(" Server (scraped /metrics) ", '=', 50))
	for _, sc := range r.Sidecars {
		fmt.Fprintf(b, "%-40s %s (%d endpoints, every %gs)\n", "Sidecar:", filepath.Base(sc.Path), len(sc.Endpoints), sc.IntervalS)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(b, "NOTE: "+n)
	}
	for i := range r.Targets {
		t := &r.Targets[i]
		server := t.Server
		if server == "" {
			server = "no known server metrics"
		}
		fmt.Fprintln(b, center(" "+t.Target+" ", '-', 50))
		fmt.Fprintf(b, "%-40s %s\n", "Server:", server)
		fmt.Fprintf(b, "%-40s %.2f-%.2f s, %d scrapes, %d failed\n", "Window:", t.FromS, t.ToS, t.Scrapes, t.Failed)
		for _, f := range t.Failures {
			fmt.Fprintf(b, "scrape failures: %s x%d, the last: %s\n", f.Kind, f.Count, truncate(f.Last, 200))
		}
		if t.Running != nil || t.Waiting != nil || t.KVCacheUsage != nil {
			fmt.Fprintf(b, "%-28s %10s %10s %10s\n", "gauge", "min", "mean", "max")
			g := func(name string, x *ServerGauge, scale float64) {
				if x != nil {
					fmt.Fprintf(b, "%-28s %10.2f %10.2f %10.2f\n", name, x.Min*scale, x.Mean*scale, x.Max*scale)
				}
			}
			g("requests running", t.Running, 1)
			g("requests waiting", t.Waiting, 1)
			g("KV-cache usage (%)", t.KVCacheUsage, 100)
		}
		if c := t.Preemptions; c != nil {
			fmt.Fprintf(b, "%-40s %.0f (%.2f/s)\n", "Preemptions:", c.Increase, c.PerSecond)
		}
		if t.PrefixCacheHitRate != nil {
			fmt.Fprintf(b, "%-40s %.2f\n", "Prefix-cache hit rate (%):", *t.PrefixCacheHitRate*100)
			if c := t.ClientPrefixCacheHitRate; c != nil && t.ClientMinusServerHitRate != nil {
				fmt.Fprintf(b, "%-40s %.2f (client - server %+.2f points)\n", "Prefix-cache hit rate, usage (%):", *c*100, *t.ClientMinusServerHitRate*100)
			}
		}
		if c := t.GenerationTokens; c != nil {
			fmt.Fprintf(b, "%-40s %.2f\n", "Generation tokens/s (server):", c.PerSecond)
		}
		if c := t.PromptTokens; c != nil {
			fmt.Fprintf(b, "%-40s %.0f\n", "Prompt tokens (server):", c.Increase)
		}
		if len(t.Latency) > 0 {
			fmt.Fprintf(b, "%-6s %4s %10s %21s %10s %13s\n", "ms", "p", "server", "bucket", "client", "client-server")
			for _, l := range t.Latency {
				fmt.Fprintf(b, "%-6s %4s %10s %21s %10s %13s\n", l.Metric, "mean", msOrDash(l.MeanMs), "(exact)",
					msOrDash(l.ClientMeanMs), msOrDash(l.ClientMinusServerMeanMs))
				for _, q := range l.Quantiles {
					bucket := "-"
					if q.ServerMs != nil {
						bucket = "[" + msOrDash(q.BucketLowMs) + ", " + msOrInf(q.BucketHighMs) + "]"
					}
					fmt.Fprintf(b, "%-6s %4s %10s %21s %10s %13s\n", l.Metric, pWord(q.P), msOrDash(q.ServerMs),
						bucket, msOrDash(q.ClientMs), msOrDash(q.ClientMinusServerMs))
				}
			}
			fmt.Fprintln(b, "NOTE: client-server is network plus client overhead; server quantiles interpolate inside the bucket shown, so")
			fmt.Fprintln(b, "      within a bucket's width only the means (the server's _sum/_count) compare exactly")
		}
	}
}

func msOrDash(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

func msOrInf(v *float64) string {
	if v == nil {
		return "+Inf"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}
