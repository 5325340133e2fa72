package sweep

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// A figure one sweep lacks (no knee, no answer) prints "-" on the page as
// in the text, never a 0 that reads as a measured value.
func TestCompareHTMLShowsMissingAsDash(t *testing.T) {
	a, b := goldenSweep(t, 2.2), goldenSweep(t, 3.1)
	b.Knee, b.Answer = nil, nil
	var txt, page bytes.Buffer
	if err := WriteCompare(&txt, a, b, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareHTML(&page, a, b, "a", "b", "", ""); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`<tr><td class="l">knee throughput \(req/s\)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>`).FindStringSubmatch(page.String())
	if row == nil {
		t.Fatalf("no knee row in the page:\n%s", page.String())
	}
	if row[1] == "-" || row[2] != "-" || row[3] != "n/a" {
		t.Errorf("knee row cells = %q, want A's value, -, n/a", row[1:])
	}
	for _, line := range strings.Split(txt.String(), "\n") {
		if strings.HasPrefix(line, "knee throughput") {
			if f := strings.Fields(line); f[len(f)-2] != "-" || f[len(f)-3] != row[1] {
				t.Errorf("text row %q disagrees with the page's %q", line, row[1:])
			}
		}
	}
}

// A load run twice draws its line through the rerun only; the run it
// replaced is a marker without a line, so the curve does not zig-zag.
func TestRetriedStepIsNotOnTheCurve(t *testing.T) {
	s := goldenSweep(t, 2.2)
	n := len(s.Steps)
	again := s.Steps[n-1]
	again.Index, again.Throughput = n+1, again.Throughput*0.5
	s.Steps = append(s.Steps, again)
	x, xl := s.xOf()
	cs := s.charts("", nil, x, xl)
	var tput, retried *series
	for i := range cs[0].series {
		switch cs[0].series[i].name {
		case "throughput":
			tput = &cs[0].series[i]
		case "replaced by a rerun":
			retried = &cs[0].series[i]
		}
	}
	if tput == nil || retried == nil || !retried.markersOnly || len(retried.pts) != 1 {
		t.Fatalf("throughput %v, replaced %v", tput, retried)
	}
	if len(tput.pts) != n || retried.pts[0].y != s.Steps[n-1].Throughput {
		t.Errorf("the curve has %d points (want %d), the replaced run is at %g", len(tput.pts), n, retried.pts[0].y)
	}
	var b strings.Builder
	cs[0].render(&b)
	if got := strings.Count(b.String(), "<polyline"); got != 2 { // throughput and offered
		t.Errorf("%d polylines: the replaced run has a line", got)
	}
}

// The sweep's interactivity chart is its curve: one point per standing
// step, output tokens/s against 1000 / median TPOT.
func TestSweepInteractivityCurve(t *testing.T) {
	s := goldenSweep(t, 2.2)
	for i := range s.Steps {
		s.Steps[i].OutputThroughput = 100 * float64(i+1)
	}
	x, xl := s.xOf()
	cs := s.charts("", nil, x, xl)
	c := cs[len(cs)-1]
	if c.id != "interactivity" || len(c.series) != 1 {
		t.Fatalf("last chart %q", c.id)
	}
	want := 0
	for _, r := range s.Steps {
		if r.Completed > 0 && r.TPOT.P50 > 0 {
			want++
		}
	}
	pts := c.series[0].pts
	if len(pts) != want || want == 0 {
		t.Fatalf("%d points, %d steps", len(pts), want)
	}
	if p := pts[0]; p.x != 1000/s.Steps[0].TPOT.P50 || p.y != s.Steps[0].OutputThroughput {
		t.Errorf("first point %v", p)
	}
}
