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
		writeSpec(b, t.Spec)
		writeEnergy(b, t.Energy)
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

// writeSpec prints the speculative decoding figures (nothing when nil).
func writeSpec(b *bufio.Writer, sp *ServerSpec) {
	if sp == nil {
		return
	}
	if sp.Drafts != nil {
		fmt.Fprintf(b, "%-40s %.0f drafts, %s draft tokens, %s accepted\n", "Spec decode (server):", sp.Drafts.Increase,
			counterOrDash(sp.DraftTokens), counterOrDash(sp.AcceptedTokens))
	}
	if sp.AcceptanceRate != nil {
		fmt.Fprintf(b, "%-40s %.2f\n", "Spec acceptance rate (%):", *sp.AcceptanceRate*100)
	}
	if sp.MeanAcceptanceLength != nil {
		fmt.Fprintf(b, "%-40s %.3f\n", "Spec mean acceptance length:", *sp.MeanAcceptanceLength)
	}
	if g := sp.ServerAcceptLength; g != nil {
		fmt.Fprintf(b, "%-40s %.3f (mean of %d scrapes)\n", "Spec accept length (server gauge):", g.Mean, g.Samples)
	}
	if g := sp.ServerAcceptRate; g != nil {
		fmt.Fprintf(b, "%-40s %.2f (mean of %d scrapes)\n", "Spec accept rate, server gauge (%):", g.Mean*100, g.Samples)
	}
	if sp.StreamTokensPerEvent != nil {
		fmt.Fprintf(b, "%-40s %.3f (%d tokens / %d decode events)\n", "Stream tokens per decode event:", *sp.StreamTokensPerEvent,
			sp.StreamTokens, sp.StreamEvents)
		if len(sp.StreamPerRequest) > 0 {
			fmt.Fprintf(b, "%-40s", "  per request:")
			for _, p := range sp.StreamPerRequest {
				fmt.Fprintf(b, " p%s %.3f", pWord(p.P), p.V)
			}
			fmt.Fprintln(b)
		}
	}
	if sp.MeanAcceptanceLength != nil {
		fmt.Fprintln(b, "NOTE: mean acceptance length is 1 + accepted / drafts (vLLM's: tokens per step, the bonus token included);")
		fmt.Fprintln(b, "      the stream's tokens per decode event should match it when every step is streamed as one event")
	}
}

// writeEnergy prints the energy figures (nothing when nil).
func writeEnergy(b *bufio.Writer, e *ServerEnergy) {
	if e == nil {
		return
	}
	fmt.Fprintf(b, "%-40s %.1f J over %.2f s (%d GPUs)\n", "Energy (GPUs):", e.Joules, e.SpanS, e.GPUs)
	fmt.Fprintf(b, "%-40s %.1f\n", "Mean power (W):", e.MeanPowerW)
	if e.PowerGaugeW != nil {
		fmt.Fprintf(b, "%-40s %.1f\n", "Mean power, power gauge (W):", *e.PowerGaugeW)
	}
	if e.TokensPerJoule != nil {
		fmt.Fprintf(b, "%-40s %.4f\n", "Output tokens per joule:", *e.TokensPerJoule)
	}
	if e.JoulesPerRequest != nil {
		fmt.Fprintf(b, "%-40s %.3f\n", "Joules per request:", *e.JoulesPerRequest)
	}
	if e.Resets > 0 {
		fmt.Fprintf(b, "NOTE: the energy counter reset %d times in the window (a GPU or exporter restarted)\n", e.Resets)
	}
}

func counterOrDash(c *ServerCounter) string {
	if c == nil {
		return "-"
	}
	return strconv.FormatFloat(c.Increase, 'f', 0, 64)
}
