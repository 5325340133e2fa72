package analyze

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/chromiumtest"
	"github.com/tracekit/tracekit/internal/svgchart"
	"github.com/tracekit/tracekit/trace"
)

// runOf is one run of 20 streamed requests whose TTFT is ttft ms (one in
// ten slow, at 3x) and whose tokens arrive 10 ms apart, recorded to a file
// of dir and analyzed back.
func runOf(t *testing.T, dir, name string, ttft int64) *Summary {
	t.Helper()
	var recs []trace.Record
	for i := range int64(20) {
		sent := i * 100
		first := ttft
		if i%10 == 9 {
			first = 3 * ttft
		}
		var ev [][2]int64
		for k := range int64(5) {
			ev = append(ev, [2]int64{sent + first + 10*k, 1})
		}
		recs = append(recs, rec(fmt.Sprint(i), 0, sent, sent, sent, sent+first+40, 200, "", 10, 10, 5, -1, ev...))
	}
	meta := trace.RunMeta{TracekitVersion: "v1.2.3", Host: "bench-1", Targets: []string{"http://gpu:8000"}, StartWallNs: 1_700_000_000e9,
		Command: "tracekit replay chat.parquet --num-runs 3", Config: map[string]any{"trace": "chat.parquet", "trace_sha256": "ab12", "trace_bytes": float64(4096)}}
	s, err := Files([]string{writeRecording(t, dir, name, meta, recs)}, Options{Metrics: allMetrics, Percentiles: []float64{50, 99}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runSetOf aggregates runs whose TTFTs are ttfts.
func runSetOf(t *testing.T, ttfts ...int64) *RunSet {
	t.Helper()
	dir := t.TempDir()
	var names []string
	var sums []*Summary
	for i, v := range ttfts {
		name := fmt.Sprintf("run-%d.parquet", i+1)
		names, sums = append(names, name), append(sums, runOf(t, dir, name, v))
	}
	rs, err := AggregateRuns(names, sums, DefaultConfidence)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

var seriesRE = regexp.MustCompile(`data-series="([^"]+)"`)

// seriesIn lists the tagged series of the chart with id in page.
func seriesIn(t *testing.T, page, id string) []string {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no chart %s", id)
	}
	chart := page[i:]
	chart = chart[:strings.Index(chart, "</svg>")]
	var out []string
	for _, m := range seriesRE.FindAllStringSubmatch(chart, -1) {
		out = append(out, m[1])
	}
	return out
}

// The page of a set of three runs: the variance headline names the
// noisiest metric, the table each run's value, the mean, its interval
// and the CV (marked when noisy), the provenance the trace's digest, and
// a chart per latency draws each run's median and P99.
func TestRunSetHTML(t *testing.T) {
	rs := runSetOf(t, 40, 50, 60)
	var b bytes.Buffer
	if err := rs.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	ttft, err := rs.stat("ttft.median")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<p class="variance" id="variance"><b>Run-to-run variance over 3 runs:</b> the noisiest metric is`,
		"<th>run 1</th><th>run 2</th><th>run 3</th><th>mean</th><th>std</th><th>95% CI of the mean</th><th>CV</th>",
		fmt.Sprintf("<tr><td>Median TTFT (ms)</td><td>40.00</td><td>50.00</td><td>60.00</td><td>50.00</td><td>10.00</td><td>%.2f to %.2f</td><td class=\"noisy\">20.00%%</td></tr>", ttft.CILow, ttft.CIHigh),
		"<dt>trace SHA-256</dt><dd>ab12 (4,096 bytes)</dd>", "<dt>machine</dt><dd>bench-1</dd>",
		"Student's t with 2 degrees of freedom",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "run-to-run variance</dt>") {
		t.Error("a run set's page says its variance is unknown")
	}
	for _, id := range []string{"runs-ttft", "runs-tpot", "runs-itl", "runs-e2el"} {
		if got := fmt.Sprint(seriesIn(t, page, id)); got != "[median P99]" {
			t.Errorf("%s: series %s, want [median P99]", id, got)
		}
	}
	if n := strings.Count(page, "<title>run 2: P99 "); n != 4 {
		t.Errorf("%d markers of run 2's P99, want one per chart (4)", n)
	}
}

// A set of one run and a single run's report say that the variance is
// unknown, and the set leaves its spread blank instead of printing 0.
func TestSingleRunVarianceUnknown(t *testing.T) {
	rs := runSetOf(t, 40)
	var b bytes.Buffer
	if err := rs.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, `<p class="variance unknown" id="variance"><b>Run-to-run variance unknown: one run.</b>`) ||
		!strings.Contains(page, "<tr><td>Median TTFT (ms)</td><td>40.00</td><td>40.00</td><td>-</td><td>-</td><td>-</td></tr>") {
		t.Errorf("a set of one run does not say its variance is unknown:\n%s", page)
	}
	b.Reset()
	if err := runOf(t, t.TempDir(), "one.parquet", 40).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<dt>run-to-run variance</dt><dd>unknown: one run") {
		t.Error("a single run's report does not say its variance is unknown")
	}
}

// The comparison of two sets: each side's variance, the means with their
// intervals, a change whose intervals are disjoint said so, and the runs
// of both sides on each latency chart.
func TestCompareRunSetsHTML(t *testing.T) {
	a, b := runSetOf(t, 40, 41, 42), runSetOf(t, 80, 81, 79)
	var out bytes.Buffer
	if err := WriteCompareRunsHTML(&out, a, b, "base", "new"); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{`id="variance-a"><b>Run-to-run variance over 3 runs:`, `id="variance-b"><b>Run-to-run variance over 3 runs:`,
		"<tr><td>Median TTFT (ms)</td><td>41.00</td>", "<td>+95.12%</td><td>disjoint</td></tr>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if got := fmt.Sprint(seriesIn(t, page, "runs-ttft")); got != "[A median A P99 B median B P99]" {
		t.Errorf("ttft chart series %s", got)
	}
	out.Reset()
	if err := WriteCompareRunsHTML(&out, a, runSetOf(t, 80), "base", "one"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `id="variance-b"><b>Run-to-run variance unknown: one run.</b>`) {
		t.Error("a side of one run does not say its variance is unknown")
	}
}

// The run set page and the comparison of two sets in headless Chromium:
// each latency chart draws its runs in the sides' colours, and the
// headline and table render. Chromium that crashes (it may under load) is
// launched once more.
func TestRunSetHTMLRendersInChromium(t *testing.T) {
	chromium := chromiumtest.Path(t) // opt-in: make render-check
	dir := t.TempDir()
	keep := os.Getenv("TRACEKIT_SCREENSHOTS")
	launch := func(name string, args ...string) []byte {
		t.Helper()
		return chromiumtest.Run(t, chromium, dir, name, args...)
	}
	pages := map[string]string{}
	var b bytes.Buffer
	set := runSetOf(t, 40, 50, 60)
	if err := set.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	pages["runset"] = b.String()
	b.Reset()
	if err := WriteCompareRunsHTML(&b, set, runSetOf(t, 80, 81, 79), "base", "new"); err != nil {
		t.Fatal(err)
	}
	pages["compare-runs"] = b.String()
	for name, page := range pages {
		p := filepath.Join(dir, name+".html")
		if err := os.WriteFile(p, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		dom := string(launch(name+"-dom", "--dump-dom", "file://"+p))
		if !strings.Contains(dom, "Run-to-run variance over 3 runs") || strings.Count(dom, `<svg class="chart"`) != 4 {
			t.Errorf("%s: the rendered page lacks the headline or a chart", name)
		}
		shot := filepath.Join(dir, name+".png")
		if keep != "" {
			shot = filepath.Join(keep, name+".png")
		}
		launch(name, "--screenshot="+shot, "--window-size=1000,3200", "file://"+p)
		img := decodePNG(t, shot)
		colors := map[string]color.RGBA{"blue": hexColor(svgchart.Blue)}
		if name == "compare-runs" {
			colors["red"] = hexColor(svgchart.Red)
		}
		for cname, c := range colors {
			if spanOf(img, c) < 20 {
				t.Errorf("%s: the %s runs are not drawn (screenshot %s)", name, cname, shot)
			}
		}
	}
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}
