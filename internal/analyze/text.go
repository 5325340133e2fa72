package analyze

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Metric headers in vLLM's print order.
var metricInfo = []struct{ key, name, header string }{
	{"ttft", "TTFT", "Time to First Token"},
	{"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
	{"itl", "ITL", "Inter-token Latency"},
	{"e2el", "E2EL", "End-to-end Latency"},
}

// metric returns the headline Stats of a vLLM metric key.
func (s *Summary) metric(key string) Stats {
	switch key {
	case "ttft":
		return s.TTFT
	case "tpot":
		return s.TPOT
	case "itl":
		return s.ITL
	}
	return s.E2EL
}

// center is Python's "{s:{c}^{n}}": extra padding goes to the right.
func center(s string, fill byte, n int) string {
	pad := n - len(s)
	if pad <= 0 {
		return s
	}
	return strings.Repeat(string(fill), pad/2) + s + strings.Repeat(string(fill), pad-pad/2)
}

// pWord is vLLM's percentile label: "99" for 99.0, "99.9" otherwise.
func pWord(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }

// WriteText prints vLLM's "Serving Benchmark Result" block, row for row,
// then tracekit's extra sections.
func (s *Summary) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	s.writeVLLM(b)
	s.writeExtras(b)
	return b.Flush()
}

func (s *Summary) writeVLLM(b *bufio.Writer) {
	row := func(label string, v any) {
		var val string
		switch v := v.(type) {
		case float64:
			val = strconv.FormatFloat(v, 'f', 2, 64)
		default:
			val = fmt.Sprint(v)
		}
		fmt.Fprintf(b, "%-40s %-10s\n", label, val)
	}
	fmt.Fprintln(b, center(" Serving Benchmark Result ", '=', 50))
	row("Successful requests:", s.Completed)
	row("Failed requests:", s.Failed+s.CanceledByClient)
	if s.MaxConcurrency > 0 {
		row("Maximum request concurrency:", s.MaxConcurrency)
	}
	if s.RequestRate > 0 {
		row("Request rate configured (RPS):", s.RequestRate)
	}
	row("Benchmark duration (s):", s.Duration)
	row("Total input tokens:", s.TotalInput)
	row("Total generated tokens:", s.TotalOutput)
	row("Request throughput (req/s):", s.RequestThroughput)
	if !s.Options.Goodput.IsZero() {
		row("Request goodput (req/s):", s.RequestGoodput)
	}
	row("Output token throughput (tok/s):", s.OutputThroughput)
	row("Peak output token throughput (tok/s):", s.MaxOutputTokensPerS)
	row("Peak concurrent requests:", float64(s.MaxConcurrentRequests))
	row("Total token throughput (tok/s):", s.TotalTokenThroughput)
	for _, m := range metricInfo {
		if !s.Options.hasMetric(m.key) {
			continue
		}
		st := s.metric(m.key)
		fmt.Fprintln(b, center(m.header, '-', 50))
		row("Mean "+m.name+" (ms):", st.Mean)
		row("Median "+m.name+" (ms):", st.Median)
		for _, p := range st.Percentiles {
			row("P"+pWord(p.P)+" "+m.name+" (ms):", p.Value)
		}
	}
	fmt.Fprintln(b, strings.Repeat("=", 50))
}

// statsHeader and statsRow print a compact table of Stats.
func (s *Summary) statsHeader(b *bufio.Writer, first string) {
	fmt.Fprintf(b, "%-34s %8s %10s %10s", first, "count", "mean", "median")
	for _, p := range s.Options.Percentiles {
		fmt.Fprintf(b, " %10s", "P"+pWord(p))
	}
	fmt.Fprintf(b, " %10s\n", "max")
}

func statsRow(b *bufio.Writer, name string, st Stats) {
	fmt.Fprintf(b, "%-34s %8d %10.2f %10.2f", name, st.Count, st.Mean, st.Median)
	for _, p := range st.Percentiles {
		fmt.Fprintf(b, " %10.2f", p.Value)
	}
	fmt.Fprintf(b, " %10.2f\n", st.Max)
}

func (s *Summary) writeExtras(b *bufio.Writer) {
	fmt.Fprintln(b)
	fmt.Fprintln(b, center(" tracekit ", '=', 50))
	fmt.Fprintf(b, "%-40s %s\n", "Requests analyzed:", strconv.Itoa(s.Requests))
	if s.NotSent > 0 {
		fmt.Fprintf(b, "%-40s %d (parent_failed: graph nodes whose parent failed; not in the block above, which counts requests sent)\n", "Not sent:", s.NotSent)
	}
	if s.CanceledByClient > 0 {
		fmt.Fprintf(b, "%-40s %d (canceled on purpose, --cancel-rate; counted failed in the block above, as vLLM counts what did not complete)\n", "Canceled by the client:", s.CanceledByClient)
	}
	fmt.Fprintf(b, "%-40s %d\n", "Excluded (warm-up):", s.ExcludedWarmup)
	if !s.Options.Window.IsZero() {
		fmt.Fprintf(b, "%-40s %d (window %s)\n", "Excluded (outside window):", s.ExcludedByWindow, s.Options.Window)
	}
	fmt.Fprintf(b, "%-40s %d\n", "Recordings:", len(s.Files))
	if s.NonStreaming > 0 {
		fmt.Fprintf(b, "%-40s %d (E2EL and tokens only: no TTFT, TPOT or ITL)\n", "Non-streaming completed:", s.NonStreaming)
	}
	fmt.Fprintf(b, "%-40s %s: %s\n", "ITL definition in the block above:", s.Options.ITL, itlLabels[s.Options.ITL])
	fmt.Fprintf(b, "%-40s %s\n", "Success rule:", s.Options.Success)
	fmt.Fprintf(b, "%-40s %s\n", "Latencies measured from:", map[StartMode]string{StartSent: "sent_ns (request written)", StartSlot: "slot_ns (vLLM's st: before the request is built and sent)"}[s.Options.Start])
	if s.Truncated > 0 {
		fmt.Fprintf(b, "%-40s %d (%d counted as completed: %s)\n", "Streams ended without [DONE]:", s.Truncated, s.TruncatedCompleted,
			map[bool]string{true: "vLLM's rule; --success strict fails them", false: "none ended cleanly"}[s.TruncatedCompleted > 0 && s.Options.Success == SuccessVLLM])
	}
	if n := s.PeakNote(); n != "" {
		fmt.Fprintln(b, "NOTE: "+n)
	}
	if s.Approximate {
		fmt.Fprintf(b, "NOTE: more than %d samples in a distribution: its percentiles come from a histogram (relative error <= %.1f%%)\n",
			s.Options.MaxExactSamples, HistRelErr*100)
	}

	if s.ShowEndpoints() {
		s.writeEndpoints(b)
	}
	s.writeModels(b)
	s.writeSteady(b)
	s.writeSlices(b)

	fmt.Fprintln(b, center("ITL by definition (ms)", '-', 50))
	s.statsHeader(b, "definition")
	for i, st := range []Stats{s.ITLPerEvent, s.ITLPerToken, s.ITLRequestMean, s.ITLFirstContent} {
		statsRow(b, itlLabels[i], st)
	}
	s.writeFigures(b)

	fmt.Fprintln(b, center("Latency from intended send (ms)", '-', 50))
	s.statsHeader(b, "metric")
	statsRow(b, "TTFT from send", s.TTFT)
	statsRow(b, "TTFT from intended (CO-corrected)", s.CorrectedTTFT)
	statsRow(b, "E2EL from send", s.E2EL)
	statsRow(b, "E2EL from intended (CO-corrected)", s.CorrectedE2EL)
	statsRow(b, "queue time (slot - intended)", s.Queue)
	statsRow(b, "send delay (sent - slot)", s.SendDelay)

	s.writeHealth(b)

	if len(s.Errors) > 0 {
		fmt.Fprintln(b, center("Errors by kind", '-', 50))
		for _, e := range s.Errors {
			fmt.Fprintf(b, "%-20s %8d  %s\n", e.Kind, e.Count, truncate(e.Example, 80))
		}
	}

	s.writeMedia(b)
	fmt.Fprintln(b, center("Cached prompt tokens", '-', 50))
	if s.Cache.Reporting == 0 {
		fmt.Fprintln(b, "not reported by the server")
	} else {
		fmt.Fprintf(b, "%-40s %d\n", "Requests reporting cached tokens:", s.Cache.Reporting)
		fmt.Fprintf(b, "%-40s %d\n", "Cached prompt tokens:", s.Cache.CachedTokens)
		fmt.Fprintf(b, "%-40s %.2f\n", "Cache hit rate (%):", s.Cache.HitRatio*100)
		pct := func(v Values) string {
			return fmt.Sprintf("mean %.2f, median %.2f, min %.2f, max %.2f over %d", v.Mean*100, v.Median*100, v.Min*100, v.Max*100, v.Count)
		}
		fmt.Fprintf(b, "%-40s %s requests\n", "Hit rate per request (%):", pct(s.Cache.PerRequest))
		fmt.Fprintf(b, "%-40s %s sessions\n", "Hit rate per session (%):", pct(s.Cache.PerSession))
	}

	if len(s.Turns) > 0 {
		fmt.Fprintln(b, center("Per turn", '-', 50))
		fmt.Fprintf(b, "%5s %7s %6s %10s %10s %10s %9s %8s %8s %8s %6s\n",
			"turn", "ok", "failed", "TTFT mean", "TTFT p50", "TTFT p90", "TPOT mean", "prompt", "output", "cached", "hit%")
		for _, t := range s.Turns {
			fmt.Fprintf(b, "%5d %7d %6d %10.2f %10.2f %10.2f %9.2f %8.1f %8.1f %8.1f %6.1f\n",
				t.Turn, t.Completed, t.Failed, t.MeanTTFTms, t.P50TTFTms, t.P90TTFTms, t.MeanTPOTms,
				t.MeanPrompt, t.MeanOutput, t.MeanCached, t.CacheHitRatio*100)
		}
	}
	s.writeMultiTurn(b)
	s.writeSessions(b)
	s.writeServer(b)
}

func (s *Summary) writeHealth(b *bufio.Writer) {
	fmt.Fprintln(b, center("Client health", '-', 50))
	if len(s.Health) == 0 {
		fmt.Fprintln(b, "no health figures in the run metadata")
	}
	for _, fh := range s.Health {
		h := fh.H
		if len(s.Health) > 1 {
			fmt.Fprintln(b, fh.Path+":")
		}
		fmt.Fprintf(b, "%-40s %.2f / %.2f / %.2f\n", "Dispatch lag p50/p99/max (ms):",
			float64(h.DispatchLagP50Ns)/1e6, float64(h.DispatchLagP99Ns)/1e6, float64(h.DispatchLagMaxNs)/1e6)
		fmt.Fprintf(b, "%-40s %.2f\n", "Go scheduler latency p99 (ms):", float64(h.SchedLatP99Ns)/1e6)
		fmt.Fprintf(b, "%-40s %.2f / %.2f\n", "CPU seconds / wall seconds:", h.CPUSeconds, h.WallSeconds)
		fmt.Fprintf(b, "%-40s %.1f\n", "Max RSS (MiB):", float64(h.MaxRSSBytes)/(1<<20))
	}
	for _, w := range s.Warnings {
		fmt.Fprintln(b, "WARNING: "+w)
	}
}

// writeMultiTurn prints vLLM multi-turn's statistics summary layout.
func (s *Summary) writeMultiTurn(b *bufio.Writer) {
	mt := s.MultiTurn
	fmt.Fprintln(b, strings.Repeat("-", 100))
	fmt.Fprintln(b, "Statistics summary:")
	fmt.Fprintf(b, "runtime_sec = %.3f\n", mt.RuntimeSec)
	fmt.Fprintf(b, "requests_per_sec = %.3f\n", mt.RequestsPerSec)
	fmt.Fprintln(b, strings.Repeat("-", 100))
	fmt.Fprintf(b, "%-18s %7s %10s %10s %10s", "", "count", "mean", "std", "min")
	for _, c := range mt.Columns {
		fmt.Fprintf(b, " %10s", c)
	}
	fmt.Fprintf(b, " %10s\n", "max")
	for _, r := range mt.Rows {
		fmt.Fprintf(b, "%-18s %7d %10.3f %10.3f %10.3f", r.Name, r.Count, r.Mean, r.Std, r.Min)
		for _, p := range r.Pcts {
			fmt.Fprintf(b, " %10.3f", p)
		}
		fmt.Fprintf(b, " %10.3f\n", r.Max)
	}
	fmt.Fprintln(b, strings.Repeat("-", 100))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
