package sweep

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
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
	pts         []point
}

type point struct {
	x, y float64
	href string // link of the marker, "" for none
	tip  string // tooltip
	bad  bool   // drawn hollow: did not pass
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
	colA, colB, colC, colD = "#1f77b4", "#d62728", "#2ca02c", "#9467bd"
)

var pctColors = []string{colC, colA, colB} // p50, p90, p99

// niceStep returns a 1-2-5 step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

func tick(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

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
	fmt.Fprintf(b, `<svg class="chart" id="%s" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", c.id, cw, ch, cw, ch)
	fmt.Fprintf(b, `<text class="t" x="%d" y="20">%s</text>`+"\n", pl, html.EscapeString(c.title))
	if n == 0 {
		fmt.Fprintf(b, `<text class="a" x="%d" y="%d">no data</text></svg>`+"\n", cw/2-20, ch/2)
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
	ys := niceStep(ymax-ymin, 5)
	ymax = math.Ceil(ymax*1.05/ys) * ys
	X := func(x float64) float64 { return pl + (x-xmin)/(xmax-xmin)*pw }
	Y := func(y float64) float64 { return pt + ph - (y-ymin)/(ymax-ymin)*ph }
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", pl, pt, pw, ph)
	for y := ymin; y <= ymax+ys/2; y += ys {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text class="a" x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			pl, pl+pw, Y(y), Y(y), pl-4, Y(y)+4, tick(y))
	}
	xs := niceStep(xmax-xmin, 6)
	for x := math.Ceil(xmin/xs) * xs; x <= xmax+xs/1e6; x += xs {
		fmt.Fprintf(b, `<text class="a" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", X(x), pt+ph+14, tick(x))
	}
	fmt.Fprintf(b, `<text class="a" x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", pl+pw/2, ch-10, html.EscapeString(c.xlabel))
	fmt.Fprintf(b, `<text class="a" transform="translate(14,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", pt+ph/2, html.EscapeString(c.ylabel))
	for i, m := range c.vmarks {
		fmt.Fprintf(b, `<line class="mark" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="5,3"/><text class="a" x="%.1f" y="%d" fill="%s">%s</text>`+"\n",
			X(m.v), X(m.v), pt, pt+ph, m.color, X(m.v)+3, pt+12+12*i, m.color, html.EscapeString(m.label))
	}
	for _, m := range c.hmarks {
		fmt.Fprintf(b, `<line class="mark" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.2" stroke-dasharray="2,3"/><text class="a" x="%d" y="%.1f" fill="%s">%s</text>`+"\n",
			pl, pl+pw, Y(m.v), Y(m.v), m.color, pl+4, Y(m.v)-3, m.color, html.EscapeString(m.label))
	}
	for i, s := range c.series {
		pts := slices.Clone(s.pts)
		slices.SortStableFunc(pts, func(a, b point) int { return cmpF(a.x, b.x) })
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6,4"`
		}
		b.WriteString(`<polyline class="series" fill="none" stroke-width="1.6" stroke="` + s.color + `"` + dash + ` points="`)
		for _, p := range pts {
			fmt.Fprintf(b, "%.1f,%.1f ", X(p.x), Y(p.y))
		}
		b.WriteString("\"/>\n")
		if !s.dashed {
			for _, p := range pts {
				fill := s.color
				if p.bad {
					fill = "#fff"
				}
				dot := fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s" stroke-width="1.5"><title>%s</title></circle>`,
					X(p.x), Y(p.y), fill, s.color, html.EscapeString(p.tip))
				if p.href != "" {
					dot = `<a href="` + html.EscapeString(p.href) + `">` + dot + `</a>`
				}
				b.WriteString(dot + "\n")
			}
		}
		ly := pt + 12 + 14*i
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text class="a" x="%d" y="%d">%s</text>`+"\n",
			cw-pr-200, cw-pr-184, ly-4, ly-4, s.color, cw-pr-180, ly, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
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
	var offered series
	for i := range s.Steps {
		r := &s.Steps[i]
		if r.Requests == 0 {
			continue
		}
		p := point{x: x(r), y: r.Throughput, href: href(r), tip: r.tip(), bad: !r.Pass}
		tput.pts = append(tput.pts, p)
		g := p
		g.y = r.GoodFraction
		good.pts = append(good.pts, g)
		if r.OfferedRate > 0 && s.Plan.Axis != AxisConcurrency {
			offered.pts = append(offered.pts, point{x: x(r), y: r.OfferedRate})
		}
	}
	thr := chart{id: "throughput", title: "Throughput vs offered load", xlabel: xl, ylabel: "requests/s completed (steady)", series: []series{tput}}
	if len(offered.pts) > 0 && prefix == "" {
		offered.name, offered.color, offered.dashed = "offered (y = x)", "#999", true
		thr.series = append(thr.series, offered)
	}
	gp := chart{id: "goodput", title: "Goodput vs load", xlabel: xl, ylabel: "fraction of requests good", series: []series{good}}
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
				if r.Completed == 0 {
					continue
				}
				d := m.d(r)
				y := [...]float64{d.P50, d.P90, d.P99}[k]
				se.pts = append(se.pts, point{x: r.Throughput, y: y, href: href(r), tip: r.tip(), bad: !r.Pass})
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
	return append([]chart{thr}, append(lat, gp)...)
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
