package svgchart

import (
	"regexp"
	"strings"
	"testing"
)

// NiceStep picks the smallest 1-2-5 step giving at most n ticks.
func TestNiceStep(t *testing.T) {
	for _, c := range []struct {
		span float64
		n    int
		want float64
	}{{10, 5, 2}, {1, 5, 0.2}, {0.9, 6, 0.2}, {7, 6, 2}, {1000, 5, 200}, {3, 5, 1}, {0, 5, 1}, {-1, 5, 1}, {26, 5, 10}} {
		if got := NiceStep(c.span, c.n); got != c.want {
			t.Errorf("NiceStep(%g, %d) = %g, want %g", c.span, c.n, got, c.want)
		}
	}
}

// The two labelings: decimals from the step; whole numbers or 3 digits.
func TestLabels(t *testing.T) {
	for _, c := range []struct {
		v, step float64
		want    string
	}{{0.2, 0.2, "0.2"}, {1, 0.5, "1.0"}, {-0.0, 1, "0"}, {15, 5, "15"}, {2e9, 1e9, "2e+09"}, {0.05, 0.05, "0.05"}} {
		if got := StepLabel(c.v, c.step); got != c.want {
			t.Errorf("StepLabel(%g, %g) = %q, want %q", c.v, c.step, got, c.want)
		}
	}
	for v, want := range map[float64]string{3: "3", 2.5: "2.5", 0.333333: "0.333", 1e10: "1e+10"} {
		if got := ShortLabel(v); got != want {
			t.Errorf("ShortLabel(%g) = %q, want %q", v, got, want)
		}
	}
}

// A plot maps its data range onto its rectangle, y upwards, and draws in
// it: a line through the mapped points, escaped names and labels.
func TestPlot(t *testing.T) {
	p := Plot{Left: 10, Top: 20, Width: 100, Height: 50, XMin: 0, XMax: 10, YMin: 0, YMax: 5}
	if p.X(0) != 10 || p.X(10) != 110 || p.X(5) != 60 || p.Y(0) != 70 || p.Y(5) != 20 || p.Y(2.5) != 45 {
		t.Fatalf("mapping: X 0,5,10 -> %g %g %g; Y 0,2.5,5 -> %g %g %g", p.X(0), p.X(5), p.X(10), p.Y(0), p.Y(2.5), p.Y(5))
	}
	var b strings.Builder
	xs, ys := []float64{0, 10}, []float64{0, 5}
	p.Polyline(&b, Line{Color: Red, Tagged: true, Name: "a<b", Dash: "6,4"}, 2, func(i int) (float64, float64) { return xs[i], ys[i] })
	LegendEntry(&b, 5, 6, Red, "a&b", true)
	want := `<polyline class="series" data-series="a&lt;b" fill="none" stroke-width="1.6" stroke="#d62728" stroke-dasharray="6,4" points="10.0,70.0 110.0,20.0 "/>` + "\n" +
		`<g class="legend"><line x1="5" x2="21" y1="2" y2="2" stroke="#d62728" stroke-width="3"/><text class="a" x="25" y="6">a&amp;b</text></g>` + "\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	p.YGrid(&b, 2.5, ShortLabel)
	if n := strings.Count(b.String(), "<line"); n != 3 {
		t.Errorf("a grid over 0-5 in steps of 2.5 has %d lines, want 3:\n%s", n, b.String())
	}
}

// A log axis spans whole decades, ticks 1-2-5 in each (powers of ten only
// over more than three decades) and places a decade's ticks alike.
func TestLogX(t *testing.T) {
	lo, hi := Decades(3.2, 2400)
	if lo != 1 || hi != 1e4 {
		t.Fatalf("Decades(3.2, 2400) = %g, %g", lo, hi)
	}
	if lo, hi := Decades(20, 20); lo != 10 || hi != 100 {
		t.Errorf("Decades(20, 20) = %g, %g", lo, hi)
	}
	p := Plot{Left: 10, Width: 300, Height: 100, XMin: 0.1, XMax: 100, YMax: 1, LogX: true}
	if a, b, c := p.X(0.1), p.X(1), p.X(100); a != 10 || b != 110 || c != 310 {
		t.Errorf("X(0.1, 1, 100) = %g, %g, %g", a, b, c)
	}
	var b strings.Builder
	p.LogXTicks(&b)
	got := reTick.FindAllStringSubmatch(b.String(), -1)
	var labels []string
	for _, m := range got {
		labels = append(labels, m[1])
	}
	if want := "0.1 0.2 0.5 1 2 5 10 20 50 100"; strings.Join(labels, " ") != want {
		t.Errorf("ticks %q, want %q", labels, want)
	}
	b.Reset()
	Plot{Width: 300, XMin: 1e-3, XMax: 1e3, LogX: true}.LogXTicks(&b)
	if n := len(reTick.FindAllString(b.String(), -1)); n != 7 {
		t.Errorf("six decades have %d ticks, want the 7 powers of ten", n)
	}
}

var reTick = regexp.MustCompile(`<text class="a"[^>]*>([^<]*)</text>`)

// A mark's label in the right third of the plot ends at its line, so the
// chart's edge does not cut it off.
func TestVMarkLabelStaysInside(t *testing.T) {
	p := Plot{Left: 60, Top: 30, Width: 500, Height: 200, XMax: 10, YMax: 1}
	var b strings.Builder
	p.VMark(&b, 9.9, 0, "knee: step 12", Red)
	p.VMark(&b, 1, 1, "SLO answer: step 3", Red)
	h := b.String()
	if !strings.Contains(h, `x="552.0" y="224" fill="#d62728" text-anchor="end"`) || !strings.Contains(h, `x="113.0" y="212" fill="#d62728" text-anchor="start"`) {
		t.Errorf("labels not placed inside:\n%s", h)
	}
}
