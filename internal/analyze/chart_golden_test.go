package analyze

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/golden"
)

var reSVG = regexp.MustCompile(`(?s)<svg class="chart".*?</svg>\n`)

// The report's charts are byte for byte what they were: every chart of a
// real run's page, and charts that take each path of the renderer (a CDF's
// fixed top, 1 s bins, an integer axis, gaps, a lone point, several legend
// rows, no data) and the server's charts.
func TestChartsGolden(t *testing.T) {
	var b bytes.Buffer
	if err := failingRun(t).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "report-charts.golden.svg", []byte(strings.Join(reSVG.FindAllString(b.String(), -1), "")))

	nan := math.NaN()
	charts := []chart{
		{id: "cdf", title: "A CDF & <escaped>", xlabel: "ms", ylabel: "fraction", yMax: 1, series: []chartSeries{
			{name: "one", color: colorA, pts: [][2]float64{{0.5, 0}, {1.25, 0.5}, {3, 1}}},
			{name: "two", color: colorB, pts: [][2]float64{{0.1, 0}, {2, 1}}}}},
		{id: "logcdf", title: "A log CDF", xlabel: "ms, log", ylabel: "fraction", yMax: 1, logX: true, series: []chartSeries{
			{name: "tail", color: colorA, pts: [][2]float64{{0, 0}, {3.2, 0.2}, {12, 0.9}, {2400, 1}}}}},
		{id: "bins", title: "Bins", xlabel: "time (s)", ylabel: "req/s", bins: true, series: []chartSeries{
			{name: "rate", color: colorC, pts: [][2]float64{{0.5, 3}, {1.5, nan}, {2.5, 7}, {3.5, 6.5}, {4.5, nan}}}}},
		{id: "turns", title: "By turn", xlabel: "turn", ylabel: "ms", intX: true, series: []chartSeries{
			{name: "p50", color: colorA, pts: [][2]float64{{0, 12}, {1, 15}, {2, 1e4}}}}},
		{id: "lone", title: "One x value", xlabel: "x", ylabel: "y", series: []chartSeries{
			{name: "a very long series name that takes a whole row of the legend", color: colorA, pts: [][2]float64{{5, -2}}},
			{name: "another long series name, so the legend wraps onto rows", color: colorB, pts: [][2]float64{{5, 0.001}}},
			{name: "third", color: colorC, pts: [][2]float64{{5, 0.002}}}}},
		{id: "big", title: "Large values", xlabel: "x", ylabel: "y", series: []chartSeries{
			{name: "big", color: colorA, pts: [][2]float64{{1e9, 2e9}, {3e9, 5e9}}}}},
		{id: "empty", title: "No data", xlabel: "x", ylabel: "y", series: []chartSeries{{name: "gaps", color: colorA, pts: [][2]float64{{1, nan}}}}},
	}
	srv := failingRun(t)
	pts := func(vs ...float64) []ServerPoint {
		var ps []ServerPoint
		for i, v := range vs {
			ps = append(ps, ServerPoint{T: float64(i) * 0.5, V: v})
		}
		return ps
	}
	srv.Server = &ServerReport{Targets: []ServerTarget{
		{Target: "http://a/metrics", Series: ServerSeries{Running: pts(1, 3, 4, 2), Waiting: pts(0, 0, 2, 1), KVCacheUsage: pts(0.1, 0.25, 0.5)}},
		{Target: "http://b/metrics", Series: ServerSeries{Running: pts(2, 2), KVCacheUsage: pts(0.3, 0.2)}},
	}}
	charts = append(charts, srv.serverCharts()...)
	var sb strings.Builder
	for _, c := range charts {
		c.render(&sb)
	}
	golden.Check(t, "charts.golden.svg", []byte(sb.String()))
}
