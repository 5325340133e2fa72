package sweep

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/internal/svgchart"
)

// A chart is one inline SVG chart: lines through points, optional
// reference lines and markers. Points may link to a page.
type chart struct {
	id, title, xlabel, ylabel string
	series                    []series
	vmarks, hmarks            []mark
}

type series struct {
	name, color string
	dashed      bool
	markersOnly bool // points without a line through them
	pts         []point
}

type point struct {
	x, y float64
	href string // link of the marker, "" for none
	tip  string // tooltip
	bad  bool   // drawn hollow: did not pass
	// order is where the line passes through the point: the step's load,
	// so a curve against throughput climbs at saturation (many steps at
	// one throughput) instead of zig-zagging in the order of their x.
	order float64
}

// mark is a labelled reference line at v (vertical: x, horizontal: y).
type mark struct {
	v            float64
	label, color string
}

const (
	cw, ch                 = 620, 340
	pl, pr, pt, pb         = 64, 20, 34, 46
	pw, ph                 = cw - pl - pr, ch - pt - pb
	colA, colB, colC, colD = svgchart.Blue, svgchart.Red, svgchart.Green, svgchart.Purple
)

var pctColors = []string{colC, colA, colB} // p50, p90, p99

func (c chart) render(b *strings.Builder) {
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), math.Inf(-1)
	ymin := 0.0
	n := 0
	for _, s := range c.series {
		for _, p := range s.pts {
			if math.IsNaN(p.x) || math.IsNaN(p.y) {
				continue
			}
			xmin, xmax = min(xmin, p.x), max(xmax, p.x)
			ymin, ymax = min(ymin, p.y), max(ymax, p.y)
			n++
		}
	}
	for _, m := range c.vmarks {
		xmin, xmax = min(xmin, m.v), max(xmax, m.v)
	}
	for _, m := range c.hmarks {
		ymax = max(ymax, m.v)
	}
	svgchart.Open(b, c.id, cw, ch, pl, c.title)
	if n == 0 {
		svgchart.NoData(b, cw, ch)
		return
	}
	if xmin > 0 && xmax/xmin < 20 {
		xmin = 0 // show the origin unless the range is wide
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	ys := svgchart.NiceStep(ymax-ymin, 5)
	ymax = math.Ceil(ymax*1.05/ys) * ys
	p := svgchart.Plot{Left: pl, Top: pt, Width: pw, Height: ph, XMin: xmin, XMax: xmax, YMin: ymin, YMax: ymax}
	p.Frame(b, "")
	p.YGrid(b, ys, svgchart.ShortLabel)
	xs := svgchart.NiceStep(xmax-xmin, 6)
	p.XTicks(b, xs, xs/1e6, svgchart.ShortLabel)
	p.AxisLabels(b, c.xlabel, c.ylabel, ch-10)
	for i, m := range c.vmarks {
		p.VMark(b, m.v, i, m.label, m.color)
	}
	for _, m := range c.hmarks {
		p.HMark(b, m.v, m.label, m.color)
	}
	for i, s := range c.series {
		pts := slices.Clone(s.pts)
		slices.SortStableFunc(pts, func(a, b point) int { return cmp.Or(cmpF(a.order, b.order), cmpF(a.x, b.x)) })
		line := svgchart.Line{Color: s.color}
		if s.dashed {
			line.Dash = "6,4"
		}
		if !s.markersOnly {
			p.Polyline(b, line, len(pts), func(i int) (float64, float64) { return pts[i].x, pts[i].y })
		}
		if !s.dashed {
			for _, q := range pts {
				fill := s.color
				if q.bad {
					fill = "#fff"
				}
				p.Marker(b, q.x, q.y, fill, s.color, q.tip, q.href)
			}
		}
		svgchart.LegendEntry(b, cw-pr-200, pt+12+14*i, s.color, s.name, false)
	}
	svgchart.Close(b)
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// xOf is where a step sits on the load axis of the charts: its measured
// offered request rate when every step has one, else its load value.
func (s *Summary) xOf() (func(*StepResult) float64, string) {
	offered := len(s.Steps) > 0
	for i := range s.Steps {
		offered = offered && s.Steps[i].OfferedRate > 0
	}
	if offered && s.Plan.Axis != AxisConcurrency {
		return func(r *StepResult) float64 { return r.OfferedRate }, "offered load (requests/s sent)"
	}
	return func(r *StepResult) float64 { return r.Load.Value }, string(s.Plan.Axis)
}

// standing says, by step index, which steps stand: of several steps at one
// load the last one not interrupted (as the SLO answer reads them), and
// every interrupted step that no later step replaced.
func (s *Summary) standing() map[int]bool {
	last := map[float64]int{}
	for _, r := range s.Steps {
		if _, seen := last[r.Load.Value]; !r.Interrupted || !seen {
			last[r.Load.Value] = r.Index
		}
	}
	out := map[int]bool{}
	for _, i := range last {
		out[i] = true
	}
	return out
}

func (r *StepResult) tip() string {
	return fmt.Sprintf("step %d: %s, %s req/s, %s", r.Index, r.Load, rate(r.Throughput), r.result())
}

// charts are the sweep's curves with steps at x on the load axis; prefix
// names the series and palette overrides the colours (for compare, which
// then marks nothing and links nothing).
func (s *Summary) charts(prefix string, palette []string, x func(*StepResult) float64, xl string) []chart {
	href := func(r *StepResult) string { return r.Report }
	if prefix != "" {
		href = func(*StepResult) string { return "" }
	}
	colors := pctColors
	if palette != nil {
		colors = palette
	}
	tput := series{name: prefix + "throughput", color: colors[1%len(colors)], dashed: false}
	good := series{name: prefix + "good fraction", color: colors[1%len(colors)]}
	// A load run again (the client distorted it) has one step that stands,
	// its last: the curves go through that one only, the runs it replaced
	// are grey markers beside it.
	retried := series{name: prefix + "replaced by a rerun", color: "#aaa", markersOnly: true}
	retriedGood := retried
	var offered series
	stands := s.standing()
	for i := range s.Steps {
		r := &s.Steps[i]
		if r.Requests == 0 {
			continue
		}
		p := point{x: x(r), y: r.Throughput, href: href(r), tip: r.tip(), bad: !r.Pass, order: r.Load.Value}
		g := p
		g.y = r.GoodFraction
		if !stands[r.Index] {
			p.tip += " (replaced by a rerun)"
			g.tip = p.tip
			retried.pts = append(retried.pts, p)
			retriedGood.pts = append(retriedGood.pts, g)
			continue
		}
		tput.pts = append(tput.pts, p)
		good.pts = append(good.pts, g)
		if r.OfferedRate > 0 && s.Plan.Axis != AxisConcurrency {
			offered.pts = append(offered.pts, point{x: x(r), y: r.OfferedRate, order: r.Load.Value})
		}
	}
	thr := chart{id: "throughput", title: "Throughput vs offered load", xlabel: xl, ylabel: "requests/s completed (steady)", series: []series{tput}}
	if len(offered.pts) > 0 && prefix == "" {
		offered.name, offered.color, offered.dashed = "offered (y = x)", "#999", true
		thr.series = append(thr.series, offered)
	}
	gp := chart{id: "goodput", title: "Goodput vs load", xlabel: xl, ylabel: "fraction of requests good", series: []series{good}}
	if len(retried.pts) > 0 {
		thr.series = append(thr.series, retried)
		gp.series = append(gp.series, retriedGood)
	}
	var lat []chart
	for _, m := range []struct {
		key, name string
		d         func(*StepResult) Dist
	}{
		{MetricTTFT, "TTFT", func(r *StepResult) Dist { return r.TTFT }},
		{MetricTPOT, "TPOT", func(r *StepResult) Dist { return r.TPOT }},
		{MetricITL, "ITL", func(r *StepResult) Dist { return r.ITL }},
	} {
		c := chart{id: m.key, title: m.name + " percentiles vs throughput", xlabel: "requests/s completed (steady)", ylabel: m.name + " (ms)"}
		for k, name := range []string{"p50", "p90", "p99"} {
			se := series{name: prefix + m.name + " " + name, color: colors[k%len(colors)]}
			for i := range s.Steps {
				r := &s.Steps[i]
				if r.Completed == 0 || !stands[r.Index] {
					continue
				}
				d := m.d(r)
				y := [...]float64{d.P50, d.P90, d.P99}[k]
				se.pts = append(se.pts, point{x: r.Throughput, y: y, href: href(r), tip: r.tip(), bad: !r.Pass, order: r.Load.Value})
			}
			c.series = append(c.series, se)
		}
		for _, o := range s.Criteria.SLO {
			if o.Metric == m.key && prefix == "" {
				c.hmarks = append(c.hmarks, mark{v: o.ThresholdMs(), label: "SLO " + o.String(), color: colD})
			}
		}
		lat = append(lat, c)
	}
	if prefix == "" {
		if s.Criteria.GoodputTarget > 0 {
			gp.hmarks = append(gp.hmarks, mark{v: s.Criteria.GoodputTarget, label: fmt.Sprintf("target %.3g%%", 100*s.Criteria.GoodputTarget), color: colD})
		}
		if k := s.Knee; k != nil {
			if r := s.step(k.Step); r != nil {
				km := mark{v: x(r), label: "knee: step " + fmt.Sprint(k.Step), color: "#ff7f0e"}
				thr.vmarks = append(thr.vmarks, km)
				gp.vmarks = append(gp.vmarks, km)
				for i := range lat {
					lat[i].vmarks = append(lat[i].vmarks, mark{v: r.Throughput, label: km.label, color: km.color})
				}
			}
		}
		if a := s.Answer; a != nil && a.Found {
			if r := s.step(a.Lower); r != nil {
				am := mark{v: x(r), label: "SLO answer: step " + fmt.Sprint(a.Lower), color: colD}
				thr.vmarks = append(thr.vmarks, am)
				gp.vmarks = append(gp.vmarks, am)
				for i := range lat {
					lat[i].vmarks = append(lat[i].vmarks, mark{v: r.Throughput, label: am.label, color: am.color})
				}
			}
		}
	}
	// The interactivity curve serving teams publish: what the deployment
	// gives in total against what each user sees, one point per load.
	inter := chart{id: "interactivity", title: "Throughput vs interactivity", xlabel: "tokens/s per user (1000 / median TPOT ms)", ylabel: "output tokens/s"}
	curve := series{name: prefix + "steps", color: colors[1%len(colors)]}
	for i := range s.Steps {
		r := &s.Steps[i]
		if r.Completed == 0 || !stands[r.Index] || r.TPOT.P50 <= 0 {
			continue
		}
		curve.pts = append(curve.pts, point{x: 1000 / r.TPOT.P50, y: r.OutputThroughput, href: href(r), tip: r.tip(), bad: !r.Pass, order: r.Load.Value})
	}
	inter.series = []series{curve}
	return append([]chart{thr}, append(lat, gp, inter)...)
}

const pageHead = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;background:#fff;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:28px} .grid{display:flex;flex-wrap:wrap;gap:16px}
svg.chart{border:1px solid #ddd;background:#fcfcfc} .t{font-size:14px;font-weight:600} .a{font-size:11px;fill:#444}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:3px 6px;text-align:right} th{background:#f3f3f3}
td.l{text-align:left} tr.pass td.v{color:#176e17} tr.fail td.v,tr.distorted td.v{color:#b00} .answer{font-size:15px;margin:10px 0}
pre{font-size:12px;background:#f6f6f6;padding:12px;overflow-x:auto}
</style></head><body>
`

// WriteHTML writes one offline page (inline CSS and SVG, no script, no
// fetch): the curves with the knee and the SLO answer marked, a table
// linking every step to its own report and recording, and the text table.
func (s *Summary) WriteHTML(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, pageHead, "tracekit sweep")
	fmt.Fprintf(&b, "<h1>tracekit sweep: %s</h1>\n", html.EscapeString(s.Info.Trace))
	if s.Answer != nil {
		fmt.Fprintf(&b, "<p class=\"answer\"><b>SLO answer:</b> %s</p>\n", html.EscapeString(s.AnswerLine()))
		for _, n := range s.Answer.Notes {
			fmt.Fprintf(&b, "<p>note: %s</p>\n", html.EscapeString(n))
		}
	}
	if k := s.Knee; k != nil {
		fmt.Fprintf(&b, "<p><b>knee:</b> step %d (%s), %s req/s of at most %s req/s%s</p>\n", k.Step, html.EscapeString(Load{s.Plan.Axis, k.Load}.String()),
			rate(k.Throughput), rate(k.MaxThroughput), map[bool]string{true: "", false: " (not reached)"}[k.Reached])
	}
	b.WriteString("<div class=\"grid\">\n")
	x, xl := s.xOf()
	for _, c := range append(s.charts("", nil, x, xl), s.serverCharts(x, xl)...) {
		c.render(&b)
	}
	b.WriteString("</div>\n<h2>Steps</h2>\n")
	s.writeStepTable(&b, "")
	s.writeRepeatHTML(&b)
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		return err
	}
	b.WriteString("<pre>" + html.EscapeString(text.String()) + "</pre>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeStepTable lists the steps with links to their files, relative to
// base ("" or a directory ending in /).
func (s *Summary) writeStepTable(b *strings.Builder, base string) {
	b.WriteString("<table><tr><th>step</th><th>load</th><th>offered req/s</th><th>throughput req/s</th><th>TTFT p50/p90/p99 ms</th><th>TPOT p50/p90/p99 ms</th><th>ITL p50/p90/p99 ms</th><th>good</th><th>errors</th><th>health</th><th>result</th><th>files</th></tr>\n")
	for i := range s.Steps {
		r := &s.Steps[i]
		files := ""
		if r.Report != "" {
			files += `<a href="` + html.EscapeString(base+r.Report) + `">report</a> `
		}
		if r.Recording != "" {
			files += `<a href="` + html.EscapeString(base+r.Recording) + `">recording</a>`
		}
		fmt.Fprintf(b, "<tr class=\"%s\"><td>%d</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%.1f%%</td><td>%d</td><td class=\"l\">%s</td><td class=\"l v\">%s</td><td class=\"l\">%s</td></tr>\n",
			html.EscapeString(r.Verdict), r.Index, html.EscapeString(r.Load.String()), rate(r.OfferedRate), rate(r.Throughput),
			triple(r.TTFT), triple(r.TPOT), triple(r.ITL), 100*r.GoodFraction, r.Errors, html.EscapeString(r.health()), html.EscapeString(r.result()), files)
	}
	b.WriteString("</table>\n")
}
