package analyze

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/chromiumtest"
	"github.com/tracekit/tracekit/trace"
)

// failingRun is 150 requests, 55 of them answered 503, sent over 12 s with
// a 3 s hole (4.5-7.5 s) in which nothing is sent.
func failingRun(t *testing.T) *Summary {
	t.Helper()
	var recs []trace.Record
	for i := range 150 {
		sent := int64(i) * 60
		if i >= 75 {
			sent = 7500 + int64(i-75)*60
		}
		if i >= 40 && i < 95 {
			recs = append(recs, rec(fmt.Sprint(i), 0, sent, sent, sent, sent+5, 503, trace.ErrHTTPStatus, -1, 10, -1, -1))
			continue
		}
		var ev [][2]int64
		for k := range int64(5) {
			ev = append(ev, [2]int64{sent + 100 + 30*k, 1})
		}
		recs = append(recs, rec(fmt.Sprint(i), 0, sent, sent, sent, sent+230, 200, "", 10, 10, 5, -1, ev...))
	}
	return Records(recs, trace.RunMeta{StartWallNs: 1.7e18}, Options{})
}

var (
	reChart    = regexp.MustCompile(`(?s)<svg class="chart" id="([^"]+)".*?</svg>`)
	rePlot     = regexp.MustCompile(`<rect class="plot" x="\d+" y="(\d+)"`)
	reLegendY  = regexp.MustCompile(`<g class="legend"><line [^>]*y1="(\d+)"`)
	rePolyline = regexp.MustCompile(`<polyline class="series" data-series="([^"]+)"[^>]*points="([^"]*)"`)
)

// chartsOf returns each chart's SVG by id.
func chartsOf(t *testing.T, s *Summary) map[string]string {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range reChart.FindAllStringSubmatch(b.String(), -1) {
		out[m[1]] = m[0]
	}
	return out
}

// polylines returns the point lists (SVG y per point) of one series.
func polylines(svg, series string) [][][2]float64 {
	var out [][][2]float64
	for _, m := range rePolyline.FindAllStringSubmatch(svg, -1) {
		if m[1] != series {
			continue
		}
		var pts [][2]float64
		for _, f := range strings.Fields(m[2]) {
			x, y, _ := strings.Cut(f, ",")
			px, _ := strconv.ParseFloat(x, 64)
			py, _ := strconv.ParseFloat(y, 64)
			pts = append(pts, [2]float64{px, py})
		}
		out = append(out, pts)
	}
	return out
}

// Requests per second have their own axis (a run with 55 of 150 failures
// shows them, not a line flat at zero under tokens/s), empty latency bins
// are gaps, and no legend sits inside a plot.
func TestHTMLChartsCannotMislead(t *testing.T) {
	s := failingRun(t)
	if s.Failed != 55 || s.Completed != 95 {
		t.Fatalf("completed %d failed %d", s.Completed, s.Failed)
	}
	charts := chartsOf(t, s)
	if len(charts) != 12 {
		t.Fatalf("%d charts", len(charts))
	}
	if tok := charts["throughput-time"]; strings.Contains(tok, "failed/s") || strings.Contains(tok, "completed/s") {
		t.Error("requests/s drawn on the tokens/s axis")
	}
	failed := polylines(charts["requests-time"], "failed/s")
	if len(failed) != 1 {
		t.Fatalf("failed/s polylines %d", len(failed))
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range failed[0] {
		lo, hi = min(lo, p[1]), max(hi, p[1])
	}
	if hi-lo < 100 { // the plot is about 250 px high; failures peak near its top
		t.Errorf("failed/s spans %.0f px: flat", hi-lo)
	}
	// TTFT by send second: seconds 5 and 6 had no request sent, nor did
	// 0.7-1.0 of 2 (failures only): gaps, never a point at 0 ms.
	ttft := polylines(charts["ttft-time"], "TTFT mean")
	if len(ttft) < 2 {
		t.Errorf("TTFT mean drawn as %d polyline(s): the empty seconds are not gaps", len(ttft))
	}
	points := 0
	for _, run := range ttft {
		points += len(run)
	}
	bins := 0
	for _, n := range s.Series.SentTTFT {
		if n > 0 {
			bins++
		}
	}
	if points != bins {
		t.Errorf("TTFT mean has %d points, %d bins have requests", points, bins)
	}
	// TTFT has its own axis: E2EL's chart does not draw it.
	if n := len(polylines(charts["latency-time"], "TTFT mean")); n != 0 {
		t.Errorf("TTFT mean drawn on the E2EL axis (%d polylines)", n)
	}
	for id, svg := range charts {
		top := rePlot.FindStringSubmatch(svg)
		if top == nil {
			continue // no data
		}
		plotTop, _ := strconv.Atoi(top[1])
		for _, m := range reLegendY.FindAllStringSubmatch(svg, -1) {
			if y, _ := strconv.Atoi(m[1]); y+6 > plotTop {
				t.Errorf("%s: a legend entry at y=%d is inside the plot (top %d)", id, y, plotTop)
			}
		}
	}
}

// A run shorter than one of vLLM's 1 s bins has a peak below its average
// output throughput: the report says why.
func TestPeakBelowAverageIsExplained(t *testing.T) {
	var recs []trace.Record
	for i := range int64(3) {
		recs = append(recs, rec(fmt.Sprint(i), 0, i*100, i*100, i*100, i*100+400, 200, "", 10, 10, 8, -1,
			[2]int64{i*100 + 100, 2}, [2]int64{i*100 + 200, 2}, [2]int64{i*100 + 300, 2}, [2]int64{i*100 + 400, 2}))
	}
	s := Records(recs, trace.RunMeta{}, Options{})
	if !(s.MaxOutputTokensPerS < s.OutputThroughput) {
		t.Fatalf("peak %v, average %v", s.MaxOutputTokensPerS, s.OutputThroughput)
	}
	var text, page bytes.Buffer
	s.WriteText(&text)
	s.WriteHTML(&page)
	for _, out := range []string{text.String(), page.String()} {
		if !strings.Contains(out, "shorter than one bin") {
			t.Errorf("no note on the peak below the average:\n%s", out)
		}
	}
	// The per-second charts divide the run's only, partial second by the
	// part the run covers, so the chart shows the rate, not a count that
	// understates it.
	if pt := s.perSecondRate("tokens", colorA, s.Series.OutputTokens).pts[0]; pt[0] != 0.5 || math.Abs(pt[1]-s.Series.OutputTokens[0]/s.Duration) > 1e-9 {
		t.Errorf("partial bin plotted as %v, want %v at 0.5", pt, s.Series.OutputTokens[0]/s.Duration)
	}
	if !strings.Contains(page.String(), "last second: the 0.60 s the run covers") {
		t.Error("the per-second charts do not say the last second is partial")
	}
	if handSummary(t).PeakNote() != "" {
		t.Error("a note where the peak is above the average")
	}
}

// TestHTMLRendersInChromium screenshots the whole report and every chart
// alone in headless Chromium, and checks in the pixels that each chart's
// curves are drawn where they should be: the failures of failingRun rise
// well above the requests chart's floor. TRACEKIT_SCREENSHOTS=DIR keeps
// the PNGs.
func TestHTMLRendersInChromium(t *testing.T) {
	chromium := chromiumtest.Path(t) // opt-in: make render-check
	dir := t.TempDir()
	keep := os.Getenv("TRACEKIT_SCREENSHOTS")
	shoot := func(name, page string, w, h int) image.Image {
		t.Helper()
		p := filepath.Join(dir, name+".html")
		if err := os.WriteFile(p, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(dir, name+".png")
		if keep != "" {
			shot = filepath.Join(keep, name+".png")
		}
		chromiumtest.Run(t, chromium, dir, name, "--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", w, h), "file://"+p)
		f, err := os.Open(shot)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return img
	}
	s := failingRun(t)
	var report bytes.Buffer
	if err := s.WriteHTML(&report); err != nil {
		t.Fatal(err)
	}
	full := shoot("report", report.String(), 1400, 4000)
	if spanOf(full, color.RGBA{0x1f, 0x77, 0xb4, 0xff}) == 0 {
		t.Error("the report screenshot shows no blue curve")
	}
	for _, c := range s.charts() {
		var b strings.Builder
		b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0;overflow:hidden} svg.chart{background:#fcfcfc} .t{font-size:14px;font-weight:600} .a{font-size:11px;fill:#444}</style></head><body>`)
		c.render(&b)
		b.WriteString("</body></html>")
		img := shoot(c.id, b.String(), chartW, chartH)
		for _, sr := range c.series {
			if len(sr.pts) > 0 && spanOf(img, hexColor(sr.color)) == 0 {
				t.Errorf("%s: series %q not drawn", c.id, sr.name)
			}
		}
		if c.id == "requests-time" {
			if span := spanOf(img, hexColor(colorB)); span < 100 {
				t.Errorf("requests chart: the failed/s curve spans %d px vertically: it looks flat", span)
			}
		}
	}
}

func hexColor(h string) color.RGBA {
	v, _ := strconv.ParseUint(strings.TrimPrefix(h, "#"), 16, 32)
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
}

// spanOf is the vertical extent, in pixels, of the pixels of color c
// (within a small tolerance for anti-aliasing); 0 when there are none.
func spanOf(img image.Image, c color.RGBA) int {
	lo, hi := -1, -1
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			d := func(a uint32, b uint8) int { return int(a>>8) - int(b) }
			if abs(d(r, c.R)) < 12 && abs(d(g, c.G)) < 12 && abs(d(bl, c.B)) < 12 {
				if lo < 0 {
					lo = y
				}
				hi = y
			}
		}
	}
	if lo < 0 {
		return 0
	}
	return hi - lo + 1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// The page says what produced the run, and a run where a third of the
// requests failed shows it in a red tile with each kind's count.
func TestHTMLProvenanceAndErrorTile(t *testing.T) {
	s := failingRun(t)
	s.Files[0].Meta.Command = "tracekit replay --trace chat.parquet --target http://gpu-7:8000"
	s.Files[0].Meta.TracekitVersion = "v9.8.7"
	s.Files[0].Meta.Targets = []string{"http://gpu-7:8000"}
	s.Files[0].Meta.Host = "bench-host-3"
	s.Files[0].Meta.Config = map[string]any{"trace": "chat.parquet"}
	s.Model = "llama-70b"
	var b bytes.Buffer
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	for _, want := range []string{
		"<dt>command</dt><dd>tracekit replay --trace chat.parquet --target http://gpu-7:8000</dd>",
		"<dt>tracekit</dt><dd>v9.8.7</dd>", "<dt>targets</dt><dd>http://gpu-7:8000</dd>",
		"<dt>model</dt><dd>llama-70b</dd>", "<dt>trace file</dt><dd>chat.parquet</dd>",
		"<dt>trace SHA-256</dt><dd>not recorded</dd>", "<dt>machine</dt><dd>bench-host-3</dd>",
		`<div class="tile bad" id="errors"><b>36.7% failed</b><span>55 of 150 requests sent</span>`,
		"http_status: 55</li>",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if i, j := strings.Index(h, `id="errors"`), strings.Index(h, "<svg"); i < 0 || i > j {
		t.Error("the error tile is not above the charts")
	}

	ok := handSummary(t)
	b.Reset()
	if err := ok.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if ok.Failed == 0 && !strings.Contains(b.String(), `<div class="tile ok" id="errors"><b>0 failed</b>`) {
		t.Error("a run without failures does not say 0 failed")
	}
}

// The time charts shade the drain after the last send, and the page says
// where the steady state was.
func TestHTMLMarksPhases(t *testing.T) {
	s := failingRun(t)
	ph := s.phases()
	if !ph.Steady || ph.DrainStart < 11 || ph.DrainStart > ph.End {
		t.Fatalf("phases %+v", ph)
	}
	charts := chartsOf(t, s)
	for _, id := range []string{"throughput-time", "requests-time", "concurrency-time", "ttft-time"} {
		if !strings.Contains(charts[id], `data-phase="drain"`) {
			t.Errorf("%s does not shade the drain", id)
		}
	}
	if strings.Contains(charts["ttft-cdf"], "data-phase") {
		t.Error("a CDF shaded with time phases")
	}
	var b bytes.Buffer
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `id="phases">Phases (shaded on the time charts): no warm-up`) {
		t.Error("the page does not state the phases")
	}
}

// The time-slice table counts every sent request once, in the slice it
// ended in, and marks the slices with failures; the length histograms and
// the interactivity chart are drawn from the completed requests.
func TestHTMLTimeSlicesAndHistograms(t *testing.T) {
	s := failingRun(t)
	sl := s.slicesOf(timeSlices)
	done, failed := 0, 0
	for _, x := range sl {
		done, failed = done+x.Completed, failed+x.Failed
	}
	if len(sl) != timeSlices || done != s.Completed || failed != s.Failed {
		t.Fatalf("%d slices hold %d completed, %d failed; the run has %d, %d", len(sl), done, failed, s.Completed, s.Failed)
	}
	var b bytes.Buffer
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	if got := strings.Count(h, `<tr class="bad">`); got == 0 || got == timeSlices {
		t.Errorf("%d slices marked as failing", got)
	}
	if !strings.Contains(h, "<span>median tokens/s per user</span>") {
		t.Error("no tokens/s per user tile")
	}
	charts := chartsOf(t, s)
	for _, id := range []string{"input-length", "output-length"} {
		if n := len(polylines(charts[id], "requests")); n != 1 {
			t.Errorf("%s drawn as %d polylines", id, n)
		}
	}
	if n := strings.Count(charts["interactivity"], "<circle"); n == 0 || n > timeSlices {
		t.Errorf("interactivity chart has %d points", n)
	}
}
