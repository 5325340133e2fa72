package analyze

import (
	"bufio"
	"fmt"
	"html"
	"strings"
)

// writeSessions prints the session section (graph conversations only).
func (s *Summary) writeSessions(b *bufio.Writer) {
	st := s.Sessions
	if st == nil {
		return
	}
	fmt.Fprintln(b, center("Sessions (dependency graphs)", '-', 50))
	fmt.Fprintf(b, "%-40s %d\n", "Sessions:", st.Sessions)
	fmt.Fprintf(b, "%-40s %d (%.2f%%)\n", "Sessions with every request ok:", st.Succeeded, st.SuccessRate*100)
	fmt.Fprintf(b, "%-40s %d\n", "Requests:", st.Requests)
	fmt.Fprintf(b, "%-40s %d\n", "Not sent (parent_failed):", st.ParentFailed)
	fmt.Fprintf(b, "%-40s %d\n", "Tool calls answered:", st.ToolCalls)
	fmt.Fprintf(b, "%-40s %d\n", "Tool-call mismatches:", st.ToolCallMismatches)
	fmt.Fprintf(b, "%-34s %10s %10s %10s %10s\n", "(ms, over sessions)", "mean", "p50", "p90", "max")
	for _, r := range []struct {
		name string
		d    SessionDist
	}{{"makespan", st.MakespanMs}, {"critical path (server time)", st.CriticalPathMs}, {"total server time", st.ServerTimeMs}} {
		fmt.Fprintf(b, "%-34s %10.2f %10.2f %10.2f %10.2f\n", r.name, r.d.Mean, r.d.P50, r.d.P90, r.d.Max)
	}
	fmt.Fprintf(b, "%-40s %.3f\n", "Critical path / server time (mean):", st.CriticalOverServer)
	fmt.Fprintf(b, "%5s %9s %9s %10s %10s %10s\n", "depth", "requests", "ok", "TTFT mean", "TTFT p50", "TTFT p90")
	for _, d := range st.ByDepth {
		fmt.Fprintf(b, "%5d %9d %9d %10.2f %10.2f %10.2f\n", d.Depth, d.Requests, d.Completed, d.MeanTTFTms, d.P50TTFTms, d.P90TTFTms)
	}
}

// writeSessionsHTML writes the session section as an HTML table (graph
// conversations only).
func (s *Summary) writeSessionsHTML(b *strings.Builder) {
	st := s.Sessions
	if st == nil {
		return
	}
	b.WriteString("<h2 id=\"sessions\">Sessions (dependency graphs)</h2>\n<table class=\"sessions\">\n")
	row := func(k, v string) {
		fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td></tr>\n", html.EscapeString(k), html.EscapeString(v))
	}
	row("sessions", fmt.Sprint(st.Sessions))
	row("success rate", fmt.Sprintf("%.2f%% (%d)", st.SuccessRate*100, st.Succeeded))
	row("requests / parent_failed", fmt.Sprintf("%d / %d", st.Requests, st.ParentFailed))
	row("tool calls / mismatches", fmt.Sprintf("%d / %d", st.ToolCalls, st.ToolCallMismatches))
	row("makespan mean / p90 (ms)", fmt.Sprintf("%.2f / %.2f", st.MakespanMs.Mean, st.MakespanMs.P90))
	row("critical path mean / p90 (ms)", fmt.Sprintf("%.2f / %.2f", st.CriticalPathMs.Mean, st.CriticalPathMs.P90))
	row("server time mean (ms)", fmt.Sprintf("%.2f", st.ServerTimeMs.Mean))
	row("critical path / server time", fmt.Sprintf("%.3f", st.CriticalOverServer))
	b.WriteString("</table>\n<table class=\"sessions\"><tr><th>depth</th><th>requests</th><th>ok</th><th>TTFT mean (ms)</th><th>p50</th><th>p90</th></tr>\n")
	for _, d := range st.ByDepth {
		fmt.Fprintf(b, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%.2f</td><td>%.2f</td><td>%.2f</td></tr>\n",
			d.Depth, d.Requests, d.Completed, d.MeanTTFTms, d.P50TTFTms, d.P90TTFTms)
	}
	b.WriteString("</table>\n")
}
