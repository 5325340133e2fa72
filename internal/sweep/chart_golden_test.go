package sweep

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/golden"
)

var reSVG = regexp.MustCompile(`(?s)<svg class="chart".*?</svg>\n`)

// goldenSweep is a search over the fake with a distorted step, per-step
// reports to link and server gauges, so its page has every kind of chart.
func goldenSweep(t *testing.T, capacity float64) *Summary {
	t.Helper()
	f := &fake{capacity: capacity, perLoad: 10, distorted: func(l float64) bool { return l > 3.5 && l < 4.5 }}
	cfg := searchCfg(1, 0.25, 64)
	cfg.Criteria.GoodputTarget = 0.9
	sum, err := Run(context.Background(), f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sum.Steps {
		r := &sum.Steps[i]
		r.Report = fmt.Sprintf("step-%02d.html", r.Index)
		r.ITL, r.TPOT = Dist{P50: 4, P90: 5 + float64(i), P99: 9 + 2*float64(i)}, Dist{P50: 3, P90: 4, P99: 6 + float64(i)}
		v := func(x float64) *float64 { return &x }
		r.Server = &StepServer{KVUsageMean: v(0.1 * float64(i+1)), KVUsageMax: v(0.15 * float64(i+1)), WaitingMean: v(float64(i)), WaitingMax: v(2 * float64(i))}
	}
	sum.finish()
	return sum
}

// The sweep page's and the comparison's charts are byte for byte what they
// were, and so are charts that take each path of the renderer (marks, a
// dashed series, hollow and linked points, NaN points, a narrow x range
// and a wide one, no data).
func TestChartsGolden(t *testing.T) {
	a, b := goldenSweep(t, 2.2), goldenSweep(t, 3.1)
	var page, cmp bytes.Buffer
	if err := a.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareHTML(&cmp, a, b, "a", "b", "a/sweep.html", "b/sweep.html"); err != nil {
		t.Fatal(err)
	}
	svgs := reSVG.FindAllString(page.String(), -1)
	if len(svgs) < 7 {
		t.Fatalf("the page has %d charts", len(svgs))
	}
	golden.Check(t, "sweep-charts.golden.svg", []byte(strings.Join(svgs, "")))
	golden.Check(t, "compare-charts.golden.svg", []byte(strings.Join(reSVG.FindAllString(cmp.String(), -1), "")))

	nan := math.NaN()
	charts := []chart{
		{id: "narrow", title: "Narrow x & <escaped>", xlabel: "x", ylabel: "y",
			series: []series{
				{name: "solid", color: colA, pts: []point{{x: 40, y: 3, tip: "a <b>"}, {x: 30, y: 1, bad: true, href: "s?a=1&b=2"}, {x: 35, y: nan}}},
				{name: "dashed", color: colB, dashed: true, pts: []point{{x: 30, y: 2}, {x: 41, y: 2.5}}}},
			vmarks: []mark{{v: 33, label: "knee", color: "#ff7f0e"}, {v: 37, label: "answer", color: colD}},
			hmarks: []mark{{v: 4.5, label: "SLO", color: colD}}},
		{id: "wide", title: "Wide x", xlabel: "x", ylabel: "y", series: []series{
			{name: "w", color: colC, pts: []point{{x: 0.5, y: 0.25}, {x: 64, y: 0.75}}}}},
		{id: "flat", title: "One point", xlabel: "x", ylabel: "y", series: []series{{name: "p", color: colA, pts: []point{{x: 2, y: 0}}}}},
		{id: "empty", title: "No data", xlabel: "x", ylabel: "y", series: []series{{name: "n", color: colA, pts: []point{{x: nan, y: 1}}}}},
	}
	var sb strings.Builder
	for _, c := range charts {
		c.render(&sb)
	}
	golden.Check(t, "charts.golden.svg", []byte(sb.String()))
}
