package analyze

import (
	"fmt"
	"html"
	"strconv"
	"strings"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// provenance is what produced a run, one labelled line each, as the
// recordings' metadata says (a reader of the page must be able to tell
// which target, model, trace, command and tracekit version it shows).
// Values that differ between files are joined with "; ".
func (s *Summary) provenance() [][2]string {
	var rows [][2]string
	add := func(label string, vals ...string) {
		seen, out := map[string]bool{}, []string(nil)
		for _, v := range vals {
			if v != "" && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			out = []string{"not recorded"}
		}
		rows = append(rows, [2]string{label, strings.Join(out, "; ")})
	}
	var cmds, vers, targets, hosts, starts, traces, traceInfo, sums []string
	for _, f := range s.Files {
		m := f.Meta
		cmds = append(cmds, m.Command)
		vers = append(vers, m.TracekitVersion)
		targets = append(targets, strings.Join(m.Targets, ", "))
		hosts = append(hosts, m.Host)
		if m.StartWallNs != 0 {
			starts = append(starts, time.Unix(0, m.StartWallNs).UTC().Format("2006-01-02 15:04:05 MST"))
		}
		if t, ok := m.Config["trace"].(string); ok {
			traces = append(traces, t)
		}
		if h := TraceDigest(m); h != "" {
			sums = append(sums, h)
		}
		if t := m.Trace; t != nil {
			traceInfo = append(traceInfo, fmt.Sprintf("%s, seed %d, created %s by tracekit %s: %s", t.Source, t.Seed, t.CreatedAt, t.TracekitVersion, t.Command))
		}
	}
	add("command", cmds...)
	add("tracekit", vers...)
	add("targets", targets...)
	add("model", s.Model)
	add("trace file", traces...)
	add("trace SHA-256", sums...)
	add("trace made", traceInfo...)
	add("start (UTC)", starts...)
	add("machine", hosts...)
	add("recordings", s.fileNames())
	return rows
}

// singleRunVariance is what the report of one run says of the noise
// between runs: one run cannot tell it.
const singleRunVariance = "unknown: one run (replay --num-runs N repeats it; analyze --runs reports the spread)"

// writeProvenanceHTML writes the provenance as a definition list at the
// top of the page, with the run-to-run variance a single run leaves
// unknown.
func (s *Summary) writeProvenanceHTML(b *strings.Builder) {
	writeProvenanceRows(b, append(s.provenance(), [2]string{"run-to-run variance", singleRunVariance}))
}

// writeProvenanceRows writes labelled rows as a definition list.
func writeProvenanceRows(b *strings.Builder, rows [][2]string) {
	b.WriteString("<dl class=\"prov\">\n")
	for _, r := range rows {
		fmt.Fprintf(b, "<dt>%s</dt><dd>%s</dd>\n", html.EscapeString(r[0]), html.EscapeString(r[1]))
	}
	b.WriteString("</dl>\n")
}

// TraceDigest is the SHA-256 of the trace a recording replayed, with its
// size ("3fa2... (1,048,576 bytes)"), as replay recorded it in the run's
// configuration; "" for recordings written before it was recorded, or
// of a capture.
func TraceDigest(m trace.RunMeta) string {
	h, ok := m.Config["trace_sha256"].(string)
	if !ok || h == "" {
		return ""
	}
	var size int64
	switch v := m.Config["trace_bytes"].(type) {
	case float64: // read back from JSON
		size = int64(v)
	case int64:
		size = v
	}
	if size <= 0 {
		return h
	}
	return fmt.Sprintf("%s (%s bytes)", h, groupThousands(size))
}

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
