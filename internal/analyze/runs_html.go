package analyze

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/tracekit/tracekit/internal/svgchart"
)

// The pages of run sets: analyze --runs (one set) and compare --html (two
// sets). Each says first how noisy the runs are (or that a single run
// cannot tell), then per metric the runs' values, the mean, its interval
// and the coefficient of variation, then a small chart per latency of
// each run's median and tail percentile: a run that stands apart shows at
// once.

// runsStyle is the pages' stylesheet.
const runsStyle = `<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222} h1{font-size:20px} h2{font-size:16px;margin-top:24px}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}
td:first-child,th:first-child{text-align:left} th{background:#f3f3f3} .note{color:#555} td.noisy{color:#b00;font-weight:600}
.grid{display:flex;flex-wrap:wrap;gap:16px} svg.chart{border:1px solid #ddd;background:#fcfcfc} .t{font-size:14px;font-weight:600} .a{font-size:11px;fill:#444}
.variance{border:1px solid #ddd;border-radius:6px;padding:10px 14px;background:#fafafa;display:inline-block;margin:8px 0}
.variance.unknown{border-color:#e0a800;background:#fff8e1}
dl.prov{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:12px;margin:8px 0 12px;color:#333} dl.prov dt{font-weight:600} dl.prov dd{margin:0;font-family:monospace;word-break:break-all}
</style>`

// noisyCV is the coefficient of variation from which a metric's cell is
// marked: beyond it the runs disagree by more than a change most gates
// look for.
const noisyCV = 0.05

// WriteHTML writes the set as a self-contained HTML page.
func (rs *RunSet) WriteHTML(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tracekit analyze: run set</title>\n%s</head><body>\n", runsStyle)
	fmt.Fprintf(&b, "<h1>tracekit analyze: run set of %s</h1>\n", plural(len(rs.Runs), "run", "runs"))
	rs.writeProvenance(&b)
	b.WriteString(rs.varianceHTML("variance"))
	b.WriteString("<ol>\n")
	for _, r := range rs.Runs {
		fmt.Fprintf(&b, "<li>%s</li>\n", html.EscapeString(r))
	}
	ci := pWord(100*rs.Confidence) + "% CI of the mean"
	fmt.Fprintf(&b, "</ol>\n<table id=\"runs\">\n<tr><th>metric</th>")
	for i := range rs.Runs {
		fmt.Fprintf(&b, "<th>run %d</th>", i+1)
	}
	fmt.Fprintf(&b, "<th>mean</th><th>std</th><th>%s</th><th>CV</th></tr>\n", ci)
	for _, m := range rs.Metrics {
		fmt.Fprintf(&b, "<tr><td>%s</td>", html.EscapeString(m.Name))
		for _, v := range m.Values {
			fmt.Fprintf(&b, "<td>%.2f</td>", v)
		}
		fmt.Fprintf(&b, "<td>%.2f</td><td>%s</td><td>%s</td>%s</tr>\n", m.Mean, rs.spread(m.StdDev), rs.interval(m), rs.cvCell(m))
	}
	b.WriteString("</table>\n")
	rs.writeNotes(&b)
	b.WriteString("<h2>Each run's median and tail</h2>\n<div class=\"grid\">\n")
	for _, mi := range metricInfo {
		writeRunsChart(&b, "runs-"+mi.key, mi.name, []runSide{rs.side(mi.key, "", svgchart.Blue)})
	}
	b.WriteString("</div>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCompareRunsHTML writes the comparison of run sets a and b as a
// self-contained HTML page: each side's variance, the means with their
// intervals side by side, and per latency each run's median and tail.
func WriteCompareRunsHTML(w io.Writer, a, b *RunSet, nameA, nameB string) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tracekit compare: run sets</title>\n%s</head><body>\n", runsStyle)
	fmt.Fprintf(&sb, "<h1>tracekit compare: A %s (%s), B %s (%s)</h1>\n", html.EscapeString(nameA), plural(len(a.Runs), "run", "runs"),
		html.EscapeString(nameB), plural(len(b.Runs), "run", "runs"))
	sb.WriteString("<h2>A: " + html.EscapeString(nameA) + "</h2>\n")
	a.writeProvenance(&sb)
	sb.WriteString(a.varianceHTML("variance-a"))
	sb.WriteString("<h2>B: " + html.EscapeString(nameB) + "</h2>\n")
	b.writeProvenance(&sb)
	sb.WriteString(b.varianceHTML("variance-b"))
	ci := pWord(100*a.Confidence) + "% CI"
	fmt.Fprintf(&sb, "<h2>Means</h2>\n<table id=\"compare\">\n<tr><th>metric</th><th>A mean</th><th>A %s</th><th>A CV</th><th>B mean</th><th>B %s</th><th>B CV</th><th>change</th><th>intervals</th></tr>\n", ci, ci)
	for _, ma := range a.Metrics {
		mb, err := b.stat(ma.Metric)
		if err != nil {
			continue // a percentile only A computed
		}
		pct := "n/a"
		if ma.Mean != 0 {
			pct = fmt.Sprintf("%+.2f%%", 100*(mb.Mean-ma.Mean)/math.Abs(ma.Mean))
		}
		sep := "overlap"
		switch {
		case len(a.Runs) < 2 && len(b.Runs) < 2:
			sep = "-"
		case mb.CILow > ma.CIHigh || mb.CIHigh < ma.CILow:
			sep = "disjoint"
		}
		fmt.Fprintf(&sb, "<tr><td>%s</td><td>%.2f</td><td>%s</td>%s<td>%.2f</td><td>%s</td>%s<td>%s</td><td>%s</td></tr>\n",
			html.EscapeString(ma.Name), ma.Mean, a.interval(ma), a.cvCell(ma), mb.Mean, b.interval(mb), b.cvCell(mb), pct, sep)
	}
	sb.WriteString("</table>\n")
	sb.WriteString("<p class=\"note\">Disjoint intervals: the change clears the run-to-run noise of both sides; overlapping ones: it may be noise. A side of one run has no interval (its variance is unknown).</p>\n")
	sb.WriteString("<h2>Each run's median and tail</h2>\n<div class=\"grid\">\n")
	for _, mi := range metricInfo {
		writeRunsChart(&sb, "runs-"+mi.key, mi.name, []runSide{a.side(mi.key, "A ", svgchart.Blue), b.side(mi.key, "B ", svgchart.Red)})
	}
	sb.WriteString("</div>\n</body></html>\n")
	_, err := io.WriteString(w, sb.String())
	return err
}

// varianceHTML is the headline on the set's noise: unknown for one run,
// else the largest coefficient of variation among the metrics.
func (rs *RunSet) varianceHTML(id string) string {
	if len(rs.Runs) < 2 {
		return fmt.Sprintf("<p class=\"variance unknown\" id=\"%s\"><b>Run-to-run variance unknown: one run.</b> "+
			"replay --num-runs N repeats a run N times (3 at least) and analyze --runs reports the spread.</p>\n", id)
	}
	var worst RunStat
	for _, m := range rs.Metrics {
		if m.Mean != 0 && m.CV >= worst.CV {
			worst = m
		}
	}
	return fmt.Sprintf("<p class=\"variance\" id=\"%s\"><b>Run-to-run variance over %s:</b> the noisiest metric is %s, CV %.1f%% (%s%% CI of its mean %.2f to %.2f).</p>\n",
		id, plural(len(rs.Runs), "run", "runs"), html.EscapeString(worst.Name), 100*worst.CV, pWord(100*rs.Confidence), worst.CILow, worst.CIHigh)
}

// writeProvenance writes what produced the runs, as the report page of
// one run does, the values of all runs joined.
func (rs *RunSet) writeProvenance(b *strings.Builder) {
	if len(rs.sums) == 0 {
		return
	}
	all := &Summary{Model: rs.sums[0].Model}
	for _, s := range rs.sums {
		all.Files = append(all.Files, s.Files...)
	}
	writeProvenanceRows(b, all.provenance())
}

// spread is a standard deviation, "-" for one run.
func (rs *RunSet) spread(sd float64) string {
	if len(rs.Runs) < 2 {
		return "-"
	}
	return fmt.Sprintf("%.2f", sd)
}

// interval is the confidence interval of m's mean, "-" for one run.
func (rs *RunSet) interval(m RunStat) string {
	if len(rs.Runs) < 2 {
		return "-"
	}
	return fmt.Sprintf("%.2f to %.2f", m.CILow, m.CIHigh)
}

// cvCell is m's coefficient of variation as a table cell, marked when it
// passes noisyCV; "-" for one run.
func (rs *RunSet) cvCell(m RunStat) string {
	if len(rs.Runs) < 2 {
		return "<td>-</td>"
	}
	if m.CV > noisyCV {
		return fmt.Sprintf("<td class=\"noisy\">%.2f%%</td>", 100*m.CV)
	}
	return fmt.Sprintf("<td>%.2f%%</td>", 100*m.CV)
}

// writeNotes writes how the interval is computed and the set's note.
func (rs *RunSet) writeNotes(b *strings.Builder) {
	if rs.TCritical > 0 {
		fmt.Fprintf(b, "<p class=\"note\">Mean ± t·sd/√N, Student's t with %s (t = %.4f); sd is the sample standard deviation; CV is sd/|mean|, marked above %.0f%%.</p>\n",
			plural(len(rs.Runs)-1, "degree of freedom", "degrees of freedom"), rs.TCritical, 100*noisyCV)
	}
	if rs.Note != "" {
		fmt.Fprintf(b, "<p class=\"note\">NOTE: %s</p>\n", html.EscapeString(rs.Note))
	}
}

// runSide is one set's series on a runs chart: each run's median and its
// tail percentile.
type runSide struct {
	prefix, color, tail string // tail names the tail percentile (P99)
	median, high        []float64
}

// side is the median and tail of latency key for each run of rs: the
// tail is P99 when the runs computed it, else their highest percentile.
func (rs *RunSet) side(key, prefix, color string) runSide {
	sd := runSide{prefix: prefix, color: color}
	if st, err := rs.stat(key + ".median"); err == nil {
		sd.median = st.Values
	}
	tail := ""
	for _, m := range rs.Metrics {
		if strings.HasPrefix(m.Metric, key+".p") {
			tail = m.Metric // the percentiles come in increasing order
		}
	}
	if st, err := rs.stat(key + ".p99"); err == nil {
		tail = key + ".p99"
		sd.high = st.Values
	} else if st, err := rs.stat(tail); tail != "" && err == nil {
		sd.high = st.Values
	}
	if tail != "" {
		sd.tail = "P" + strings.TrimPrefix(tail, key+".p")
	}
	return sd
}

// runsChartW and runsChartH are a runs chart's size in pixels.
const runsChartW, runsChartH = 440, 230

// writeRunsChart draws one latency's median (solid) and tail (dashed) per
// run, one colour per side; x is the run's number. A chart without a
// value above 0 says "no data" (runs without streams have no ITL).
func writeRunsChart(b *strings.Builder, id, name string, sides []runSide) {
	svgchart.Open(b, id, runsChartW, runsChartH, 56, name+" per run (ms)")
	n, hi := 0, 0.0
	for _, sd := range sides {
		n = max(n, len(sd.median), len(sd.high))
		for _, v := range append(append([]float64(nil), sd.median...), sd.high...) {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				hi = max(hi, v)
			}
		}
	}
	if n == 0 || hi <= 0 {
		svgchart.NoData(b, runsChartW, runsChartH)
		return
	}
	step := svgchart.NiceStep(hi*1.05, 4)
	top := 38 + 14*len(sides) // under the title and a legend row per side
	p := svgchart.Plot{Left: 56, Top: top, Width: runsChartW - 76, Height: runsChartH - top - 40,
		XMin: 0.5, XMax: float64(n) + 0.5, YMin: 0, YMax: math.Ceil(hi*1.05/step) * step}
	p.YGrid(b, step, func(v float64) string { return svgchart.StepLabel(v, step) })
	xstep := math.Max(1, svgchart.NiceStep(float64(n), 10))
	p.XTicks(b, xstep, 0, func(v float64) string { return svgchart.ShortLabel(v) })
	p.Frame(b, "")
	p.AxisLabels(b, "run", "ms", runsChartH-8)
	for k, sd := range sides {
		for _, s := range []struct {
			label string
			vals  []float64
			dash  string
			fill  string
		}{{"median", sd.median, "", sd.color}, {sd.tail, sd.high, "5,3", "#fff"}} {
			if len(s.vals) == 0 {
				continue
			}
			name := sd.prefix + s.label
			p.Polyline(b, svgchart.Line{Color: sd.color, Tagged: true, Name: name, Dash: s.dash}, len(s.vals),
				func(i int) (float64, float64) { return float64(i + 1), s.vals[i] })
			for i, v := range s.vals {
				p.Marker(b, float64(i+1), v, s.fill, sd.color, fmt.Sprintf("%srun %d: %s %.2f ms", sd.prefix, i+1, s.label, v), "")
			}
		}
		y := 38 + 14*k
		svgchart.LegendEntry(b, p.Left, y, sd.color, sd.prefix+"median (solid)", true)
		if sd.tail != "" {
			svgchart.LegendEntry(b, p.Left+170, y, sd.color, sd.prefix+sd.tail+" (dashed)", true)
		}
	}
	svgchart.Close(b)
}
