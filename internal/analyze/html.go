package analyze

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/svgchart"
	"github.com/tracekit/tracekit/trace"
)

// chartSeries is one line of a chart.
type chartSeries struct {
	name, color string
	pts         [][2]float64
}

// chart is one inline SVG line chart.
type chart struct {
	id, title, xlabel, ylabel string
	series                    []chartSeries
	intX                      bool    // x is a count (turns): ticks at whole numbers
	bins                      bool    // x is the start of 1 s bins from the run start: the axis starts at 0
	yMax                      float64 // a fixed top of the y axis (a CDF's 1); 0: from the data
	// logX puts x on a log scale over whole decades, so one stall does not
	// squash a latency distribution against the left edge; points at
	// x <= 0 are left out (the curve starts at their fraction).
	logX bool
	// phases, on a time chart, shades warm-up and drain.
	phases *Phases
	// scatter draws markers, no line (points in no order).
	scatter bool
}

const (
	chartW, chartH         = 600, 340
	padL, padR, padT, padB = 64, 24, 34, 44 // padT: the title; legend rows go below it
	plotW                  = chartW - padL - padR
	colorA, colorB, colorC = svgchart.Blue, svgchart.Red, svgchart.Green
	cdfSteps               = 200 // points per CDF
)

// WriteHTML writes one self-contained page (inline CSS and SVG, no
// scripts, no network fetches): the text report and charts of TTFT and ITL
// CDFs, latency, throughput and concurrency over time, TTFT by turn and
// dispatch lag.
func (s *Summary) WriteHTML(w io.Writer) error {
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tracekit analyze</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;background:#fff;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:24px} table.slices{border-collapse:collapse;font-size:12px} table.slices td,table.slices th{border:1px solid #ddd;padding:3px 8px;text-align:right} table.slices th{background:#f3f3f3} table.slices tr.bad td{color:#b00} .grid{display:flex;flex-wrap:wrap;gap:16px}
svg.chart{border:1px solid #ddd;background:#fcfcfc} .t{font-size:14px;font-weight:600} .a{font-size:11px;fill:#444}
pre{font-size:12px;background:#f6f6f6;padding:12px;overflow-x:auto} .warn{color:#b00;font-weight:600} .note{color:#555}
.tiles{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0 20px} .tile{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:130px;background:#fafafa}
.tile b{display:block;font-size:22px} .tile span{font-size:12px;color:#555}
.tile.bad{border-color:#d62728;background:#fdecea} .tile.bad b{color:#b00} .tile.ok b{color:#2a7a2a} .tile ul{margin:4px 0 0;padding-left:16px;font-size:12px}
dl.prov{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:12px;margin:8px 0 12px;color:#333} dl.prov dt{font-weight:600} dl.prov dd{margin:0;font-family:monospace;word-break:break-all}
</style></head><body>
`)
	fmt.Fprintf(&b, "<h1>tracekit analyze: %s</h1>\n", html.EscapeString(s.fileNames()))
	for _, wn := range s.Warnings {
		fmt.Fprintf(&b, "<p class=\"warn\">WARNING: %s</p>\n", html.EscapeString(wn))
	}
	s.writeProvenanceHTML(&b)
	s.writeTiles(&b)
	s.writeEndpointsHTML(&b)
	s.writeModelsHTML(&b)
	s.writeFiguresHTML(&b)
	if ph := s.phases(); s.Reqs != nil {
		fmt.Fprintf(&b, "<p class=\"note\" id=\"phases\">Phases (shaded on the time charts): %s.</p>\n", html.EscapeString(ph.String()))
	}
	if n := s.PeakNote(); n != "" {
		fmt.Fprintf(&b, "<p class=\"note\">NOTE: %s</p>\n", html.EscapeString(n))
	}
	b.WriteString("<div class=\"grid\">\n")
	for _, c := range append(s.charts(), s.serverCharts()...) {
		c.render(&b)
	}
	b.WriteString("</div>\n")
	s.writeTimeSlicesHTML(&b)
	s.writeSessionsHTML(&b)
	b.WriteString("<pre>")
	b.WriteString(html.EscapeString(text.String()))
	b.WriteString("</pre>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTiles writes the headline figures, the ones people look for first,
// as large numbers above the charts (the full text report is below them).
func (s *Summary) writeTiles(b *strings.Builder) {
	tile := func(value, label string) {
		fmt.Fprintf(b, "<div class=\"tile\"><b>%s</b><span>%s</span></div>\n", html.EscapeString(value), html.EscapeString(label))
	}
	last := func(st Stats) (string, float64) { // the highest requested percentile
		if n := len(st.Percentiles); n > 0 {
			return fmt.Sprintf("P%g", st.Percentiles[n-1].P), st.Percentiles[n-1].Value
		}
		return "max", st.Max
	}
	b.WriteString("<div class=\"tiles\">\n")
	tile(fmt.Sprintf("%d / %d", s.Completed, s.Completed+s.Failed), "requests completed")
	s.writeErrorTile(b)
	if s.NotSent > 0 {
		tile(strconv.Itoa(s.NotSent), "not sent (parent_failed)")
	}
	if s.CanceledByClient > 0 {
		tile(strconv.Itoa(s.CanceledByClient), "canceled by the client")
	}
	tile(fmt.Sprintf("%.2f s", s.Duration), "benchmark duration")
	tile(fmt.Sprintf("%.1f tok/s", s.OutputThroughput), "output token throughput")
	tile(fmt.Sprintf("%.2f req/s", s.RequestThroughput), "request throughput")
	for _, m := range []struct {
		name string
		st   Stats
	}{{"TTFT", s.TTFT}, {"TPOT", s.TPOT}, {"ITL", s.ITL}} {
		if !s.generates() { // embeddings, rerank or score only: no stream to time
			break
		}
		p, v := last(m.st)
		tile(fmt.Sprintf("%.1f ms", m.st.Median), "median "+m.name)
		tile(fmt.Sprintf("%.1f ms", v), p+" "+m.name)
	}
	if u := s.Figures.OutputTokenThroughputPerUser; u.Count > 0 {
		tile(fmt.Sprintf("%.1f tok/s", u.Median), "median tokens/s per user")
	}
	b.WriteString("</div>\n")
}

// writeErrorTile writes the failed requests' share as a tile that stands
// out (red) when any failed, with the count of each error kind, or a
// plain "0 failed" when none did: a run with failures must look like one.
func (s *Summary) writeErrorTile(b *strings.Builder) {
	sent := s.Completed + s.Failed
	if s.Failed == 0 {
		fmt.Fprintf(b, "<div class=\"tile ok\" id=\"errors\"><b>0 failed</b><span>of %d requests sent</span></div>\n", sent)
		return
	}
	fmt.Fprintf(b, "<div class=\"tile bad\" id=\"errors\"><b>%.1f%% failed</b><span>%d of %d requests sent</span><ul>\n",
		100*float64(s.Failed)/float64(max(sent, 1)), s.Failed, sent)
	for _, e := range s.Errors {
		if e.Kind == string(trace.ErrParentFailed) { // not sent: its own tile
			continue
		}
		fmt.Fprintf(b, "<li title=\"%s\">%s: %d</li>\n", html.EscapeString(e.Example), html.EscapeString(e.Kind), e.Count)
	}
	b.WriteString("</ul></div>\n")
}

func (s *Summary) fileNames() string {
	names := make([]string, len(s.Files))
	for i, f := range s.Files {
		names[i] = f.Path
	}
	return strings.Join(names, ", ")
}

// cdf returns (value ms, fraction) points of a distribution.
func (s *Summary) cdf(name, color string, d *Dist) chartSeries {
	c := chartSeries{name: name, color: color}
	if d.Len() == 0 {
		return c
	}
	for i := 0; i <= cdfSteps; i++ {
		p := 100 * float64(i) / cdfSteps
		c.pts = append(c.pts, [2]float64{d.Quantile(p) / 1e6, p / 100})
	}
	return c
}

// perSecondWhere is perSecond with a gap (NaN, which render skips) in
// every bin where count is 0: no sample, not a value of 0.
func perSecondWhere(name, color string, ys, count []float64) chartSeries {
	c := perSecond(name, color, ys)
	for i := range c.pts {
		if i >= len(count) || count[i] == 0 {
			c.pts[i][1] = math.NaN()
		}
	}
	return c
}

// perSecond plots 1 s bins at their centres.
func perSecond(name, color string, ys []float64) chartSeries {
	c := chartSeries{name: name, color: color}
	for i, y := range ys {
		c.pts = append(c.pts, [2]float64{float64(i) + 0.5, y})
	}
	return c
}

// perSecondRate is perSecond of counts per 1 s bin as rates: a bin the run
// covers only in part (the last, when the run ends inside it) is divided
// by the part covered, so a short run's rate is not understated.
func (s *Summary) perSecondRate(name, color string, ys []float64) chartSeries {
	c := perSecond(name, color, ys)
	for i := range c.pts {
		if covered := float64(s.EndNs-int64(i)*nsPerSec) / 1e9; covered > 0 && covered < 1 {
			c.pts[i][1] /= covered
		}
	}
	return c
}

// partialNote is what the per-second titles add when the last bin is
// partial.
func (s *Summary) partialNote() string {
	if f := float64(s.EndNs%nsPerSec) / 1e9; s.EndNs > 0 && f > 0 {
		return fmt.Sprintf(" (last second: the %.2f s the run covers)", f)
	}
	return ""
}

func (s *Summary) charts() []chart {
	cs := s.baseCharts()
	ph := s.phases()
	for i := range cs {
		if cs[i].bins && ph.Steady {
			cs[i].phases = &ph
		}
	}
	if s.generates() {
		cs = append(cs, s.interactivityChart())
	}
	cs = append(cs, s.mediaCharts()...)
	return append(cs,
		s.lengthHistogram("input-length", "Input length (histogram)", "input tokens", colorA, func(q *Request) int32 { return q.PromptTokens }),
		s.lengthHistogram("output-length", "Output length (histogram)", "output tokens", colorC, func(q *Request) int32 { return q.OutputTokens }))
}

func (s *Summary) baseCharts() []chart {
	se := s.Series
	turnSeries := func(name, color string, f func(TurnStats) float64) chartSeries {
		c := chartSeries{name: name, color: color}
		for _, t := range s.Turns {
			if t.Completed > 0 {
				c.pts = append(c.pts, [2]float64{float64(t.Turn), f(t)})
			}
		}
		return c
	}
	return []chart{
		{id: "ttft-cdf", title: "TTFT distribution (CDF, log scale)", xlabel: "TTFT (ms, log)", ylabel: "fraction", yMax: 1, logX: true, series: []chartSeries{
			s.cdf("TTFT from send", colorA, s.dists["ttft"]),
			s.cdf("TTFT from intended", colorB, s.dists["corrected_ttft"])}},
		{id: "itl-cdf", title: "ITL distribution (CDF, log scale)", xlabel: "ITL (ms, log)", ylabel: "fraction", yMax: 1, logX: true, series: []chartSeries{
			s.cdf(itlLabels[ITLPerEvent], colorA, s.dists["itl"]),
			s.cdf(itlLabels[ITLPerToken], colorB, s.dists["itl_per_token"])}},
		// TTFT and E2EL differ by orders of magnitude: on one axis TTFT
		// lies flat on zero, so each has its own chart.
		{id: "ttft-time", title: "TTFT over time (by send second; gaps: no request sent)", xlabel: "time (s)", ylabel: "TTFT (ms)", bins: true, series: []chartSeries{
			perSecondWhere("TTFT mean", colorA, se.TTFTMeanMs, se.SentTTFT)}},
		{id: "latency-time", title: "E2EL over time (by send second; gaps: no request sent)", xlabel: "time (s)", ylabel: "E2EL (ms)", bins: true, series: []chartSeries{
			perSecondWhere("E2EL mean", colorC, se.E2ELMeanMs, se.SentOK),
			perSecondWhere("E2EL max", colorB, se.E2ELMaxMs, se.SentOK)}},
		{id: "throughput-time", title: "Output tokens per second" + s.partialNote(), xlabel: "time (s)", ylabel: "tokens/s", bins: true, series: []chartSeries{
			s.perSecondRate("output tokens/s", colorA, se.OutputTokens)}},
		{id: "requests-time", title: "Requests ended per second" + s.partialNote(), xlabel: "time (s)", ylabel: "requests/s", bins: true, series: []chartSeries{
			s.perSecondRate("completed/s", colorC, se.Completed),
			s.perSecondRate("failed/s", colorB, se.Errors)}},
		{id: "concurrency-time", title: "Requests in flight over time" + s.partialNote(), xlabel: "time (s)", ylabel: "requests", bins: true, series: []chartSeries{
			s.perSecondRate("time-averaged concurrency", colorA, se.Concurrency)}},
		{id: "ttft-turn", title: "TTFT by turn", xlabel: "turn", ylabel: "ms", intX: true, series: []chartSeries{
			turnSeries("mean", colorA, func(t TurnStats) float64 { return t.MeanTTFTms }),
			turnSeries("p90", colorB, func(t TurnStats) float64 { return t.P90TTFTms })}},
		{id: "dispatch-lag", title: "Dispatch lag: queue time and send delay (CDF)", xlabel: "ms", ylabel: "fraction", yMax: 1, series: []chartSeries{
			s.cdf("send delay (sent - slot)", colorA, s.dists["send_delay"]),
			s.cdf("queue time (slot - intended)", colorB, s.dists["queue"])}},
	}
}

// legendRowH is the height of one row of legend entries, drawn between the
// title and the plot so that no entry covers a curve.
const legendRowH = 14

// legendLayout places the legend entries left to right in rows above the
// plot; it returns each entry's position and the plot's top.
func (c chart) legendLayout() (pos [][2]int, top int) {
	x, row := padL, 0
	for _, s := range c.series {
		w := 24 + 6*len(s.name) // swatch, gap, about 6 px per character of the 11 px font
		if x+w > chartW-padR && x > padL {
			x, row = padL, row+1
		}
		pos = append(pos, [2]int{x, 36 + legendRowH*row})
		x += w + 12
	}
	return pos, padT + legendRowH*(row+1)
}

func (c chart) render(b *strings.Builder) {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	n := 0
	for _, s := range c.series {
		for _, p := range s.pts {
			if math.IsNaN(p[1]) || c.logX && p[0] <= 0 {
				continue
			}
			xmin, xmax = min(xmin, p[0]), max(xmax, p[0])
			ymin, ymax = min(ymin, p[1]), max(ymax, p[1])
			n++
		}
	}
	legend, top := c.legendLayout()
	svgchart.Open(b, c.id, chartW, chartH, padL, c.title)
	if n == 0 {
		svgchart.NoData(b, chartW, chartH)
		return
	}
	switch {
	case c.logX:
		xmin, xmax = svgchart.Decades(xmin, xmax)
	case c.bins: // 1 s bins plotted at their centres: the axis runs from the run start to the last bin's end
		xmin, xmax = 0, xmax+0.5
	case xmax <= xmin: // one x value: centre it
		xmin, xmax = xmin-0.5, xmax+0.5
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	var ys float64
	if c.yMax > 0 && ymax <= c.yMax {
		ymax = c.yMax
		ys = svgchart.NiceStep(ymax-ymin, 5)
	} else {
		ys = svgchart.NiceStep((ymax-ymin)*1.05, 5) // headroom: no curve runs along the top edge
		ymax = math.Ceil(ymax*1.05/ys) * ys
	}
	p := svgchart.Plot{Left: padL, Top: top, Width: plotW, Height: chartH - top - padB, XMin: xmin, XMax: xmax, YMin: ymin, YMax: ymax, LogX: c.logX}
	if ph := c.phases; ph != nil {
		shade := func(x0, x1 float64, label string) {
			x0, x1 = max(x0, xmin), min(x1, xmax)
			if x1 <= x0 {
				return
			}
			fmt.Fprintf(b, `<rect class="phase" data-phase="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="#eee" opacity="0.7"/><text class="a" x="%.1f" y="%d" fill="#777">%s</text>`+"\n",
				label, p.X(x0), p.Top, p.X(x1)-p.X(x0), p.Height, p.X(x0)+2, p.Top+p.Height-4, label)
		}
		shade(0, ph.WarmupEnd, "warm-up")
		shade(ph.DrainStart, xmax, "drain")
	}
	p.Frame(b, "plot")
	p.YGrid(b, ys, func(y float64) string { return svgchart.StepLabel(y, ys) })
	if c.logX {
		p.LogXTicks(b)
	} else {
		xs := svgchart.NiceStep(xmax-xmin, 6)
		if c.intX {
			xs = max(xs, 1)
		}
		p.XTicks(b, xs, 0, func(x float64) string { return svgchart.StepLabel(x, xs) })
	}
	p.AxisLabels(b, c.xlabel, c.ylabel, chartH-8)
	for i, s := range c.series {
		// One polyline per run of points; a NaN ends a run (a gap).
		var run [][2]float64
		flush := func() {
			if len(run) == 0 {
				return
			}
			if c.scatter {
				for _, pt := range run {
					p.Marker(b, pt[0], pt[1], s.color, s.color, fmt.Sprintf("%.1f tok/s per user, %.1f tok/s", pt[0], pt[1]), "")
				}
				run = run[:0]
				return
			}
			p.Polyline(b, svgchart.Line{Color: s.color, Tagged: true, Name: s.name}, len(run), func(i int) (float64, float64) { return run[i][0], run[i][1] })
			if len(run) == 1 {
				p.Dot(b, run[0][0], run[0][1], s.color)
			}
			run = run[:0]
		}
		for _, pt := range s.pts {
			if math.IsNaN(pt[1]) {
				flush()
				continue
			}
			if c.logX && pt[0] <= 0 {
				continue
			}
			run = append(run, pt)
		}
		flush()
		svgchart.LegendEntry(b, legend[i][0], legend[i][1], s.color, s.name, true)
	}
	svgchart.Close(b)
}
