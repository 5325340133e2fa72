package svgchart

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The pages' colours.
const (
	Blue   = "#1f77b4"
	Red    = "#d62728"
	Green  = "#2ca02c"
	Purple = "#9467bd"
)

// NiceStep returns a 1-2-5 step (1, 2, 5 or 10 times a power of ten)
// giving about n ticks over span: the smallest such step >= span / n.
func NiceStep(span float64, n int) float64 {
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

// StepLabel formats an axis value with as many decimals as the tick step
// needs, so that neighbouring ticks never print alike (-0 prints as 0,
// values of 1e9 and more with 3 significant digits).
func StepLabel(v, step float64) string {
	if v == 0 {
		v = 0 // not -0
	}
	if math.Abs(v) >= 1e9 {
		return fmt.Sprintf("%.3g", v)
	}
	dec := max(0, int(math.Ceil(-math.Log10(step)-1e-9)))
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// ShortLabel formats an axis value as a whole number when it is one,
// else with 3 significant digits.
func ShortLabel(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// Open starts a chart element of w x h pixels with id and its title at
// (titleX, 20).
func Open(b *strings.Builder, id string, w, h, titleX int, title string) {
	fmt.Fprintf(b, `<svg class="chart" id="%s" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n",
		id, w, h, w, h)
	fmt.Fprintf(b, `<text class="t" x="%d" y="20">%s</text>`+"\n", titleX, html.EscapeString(title))
}

// NoData writes "no data" in the middle of a w x h chart and ends it.
func NoData(b *strings.Builder, w, h int) {
	fmt.Fprintf(b, `<text class="a" x="%d" y="%d">no data</text></svg>`+"\n", w/2-20, h/2)
}

// Close ends a chart element.
func Close(b *strings.Builder) { b.WriteString("</svg>\n") }

// Plot is the rectangle data is drawn in and the data range it shows.
type Plot struct {
	Left, Top, Width, Height int
	XMin, XMax, YMin, YMax   float64
	// LogX puts x on a log scale (XMin must be > 0): a latency's tail
	// stays readable beside its body.
	LogX bool
}

// X is the pixel column of x.
func (p Plot) X(x float64) float64 {
	if p.LogX {
		return float64(p.Left) + math.Log10(x/p.XMin)/math.Log10(p.XMax/p.XMin)*float64(p.Width)
	}
	return float64(p.Left) + (x-p.XMin)/(p.XMax-p.XMin)*float64(p.Width)
}

// Decades widens [lo, hi] (lo > 0) to whole powers of ten, the range of
// a log axis.
func Decades(lo, hi float64) (float64, float64) {
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

// LogXTicks draws a grid line and a tick label at every 1, 2 and 5 times a
// power of ten from XMin to XMax of a log axis (only the powers of ten
// when the range spans more than three decades).
func (p Plot) LogXTicks(b *strings.Builder) {
	mults := []float64{1, 2, 5}
	if p.XMax/p.XMin > 1e3 {
		mults = mults[:1]
	}
	k0, k1 := int(math.Round(math.Log10(p.XMin))), int(math.Round(math.Log10(p.XMax)))
	for k := k0; k <= k1; k++ {
		for _, m := range mults {
			x, _ := strconv.ParseFloat(fmt.Sprintf("%ge%d", m, k), 64) // exact decimal, no drift
			if x > p.XMax*1.001 {
				break
			}
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text class="a" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
				p.X(x), p.X(x), p.Top, p.Top+p.Height, p.X(x), p.Top+p.Height+14, ShortLabel(x))
		}
	}
}

// Y is the pixel row of y.
func (p Plot) Y(y float64) float64 {
	return float64(p.Top) + float64(p.Height) - (y-p.YMin)/(p.YMax-p.YMin)*float64(p.Height)
}

// Frame draws the plot's border; class, when not "", is its class.
func (p Plot) Frame(b *strings.Builder, class string) {
	if class != "" {
		class = ` class="` + class + `"`
	}
	fmt.Fprintf(b, `<rect%s x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", class, p.Left, p.Top, p.Width, p.Height)
}

// YGrid draws a grid line and a tick label every step from YMin up to
// YMax (and half a step more, against rounding).
func (p Plot) YGrid(b *strings.Builder, step float64, label func(float64) string) {
	for y := p.YMin; y <= p.YMax+step/2; y += step {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text class="a" x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			p.Left, p.Left+p.Width, p.Y(y), p.Y(y), p.Left-4, p.Y(y)+4, label(y))
	}
}

// XTicks writes a tick label under the plot at every multiple of step
// from XMin up to XMax + slack.
func (p Plot) XTicks(b *strings.Builder, step, slack float64, label func(float64) string) {
	for x := math.Ceil(p.XMin/step) * step; x <= p.XMax+slack; x += step {
		fmt.Fprintf(b, `<text class="a" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", p.X(x), p.Top+p.Height+14, label(x))
	}
}

// AxisLabels writes the x axis' label centred under the plot at row
// xLabelY and the y axis' rotated at the left edge.
func (p Plot) AxisLabels(b *strings.Builder, xlabel, ylabel string, xLabelY int) {
	fmt.Fprintf(b, `<text class="a" x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", p.Left+p.Width/2, xLabelY, html.EscapeString(xlabel))
	fmt.Fprintf(b, `<text class="a" transform="translate(14,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", p.Top+p.Height/2, html.EscapeString(ylabel))
}

// Line is how a polyline is drawn.
type Line struct {
	Color string
	// Tagged writes Name as the polyline's data-series (a page's tests
	// find a series by it).
	Tagged bool
	Name   string
	Dash   string // stroke-dasharray, "" for a solid line
}

// Polyline draws a line through the n points at(0) ... at(n-1).
func (p Plot) Polyline(b *strings.Builder, l Line, n int, at func(i int) (x, y float64)) {
	b.WriteString(`<polyline class="series"`)
	if l.Tagged {
		b.WriteString(` data-series="` + html.EscapeString(l.Name) + `"`)
	}
	b.WriteString(` fill="none" stroke-width="1.6" stroke="` + l.Color + `"`)
	if l.Dash != "" {
		b.WriteString(` stroke-dasharray="` + l.Dash + `"`)
	}
	b.WriteString(` points="`)
	for i := range n {
		x, y := at(i)
		fmt.Fprintf(b, "%.1f,%.1f ", p.X(x), p.Y(y))
	}
	b.WriteString("\"/>\n")
}

// Dot draws a small filled circle at (x, y): a line of one point.
func (p Plot) Dot(b *strings.Builder, x, y float64, color string) {
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", p.X(x), p.Y(y), color)
}

// Marker draws a point marker at (x, y) with a tooltip, filled with fill
// and ringed with stroke, linking to href when it is not "".
func (p Plot) Marker(b *strings.Builder, x, y float64, fill, stroke, tip, href string) {
	dot := fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s" stroke-width="1.5"><title>%s</title></circle>`,
		p.X(x), p.Y(y), fill, stroke, html.EscapeString(tip))
	if href != "" {
		dot = `<a href="` + html.EscapeString(href) + `">` + dot + `</a>`
	}
	b.WriteString(dot + "\n")
}

// VMark draws a dashed vertical reference line at x with its label near
// the bottom, the i-th mark's label one row above the previous one's (the
// top is the legend's). A label in the right third of the plot ends at the
// line instead of starting there, so it is never cut off at the edge; a
// white halo keeps it readable over curves.
func (p Plot) VMark(b *strings.Builder, x float64, i int, label, color string) {
	tx, anchor := p.X(x)+3, "start"
	if p.X(x) > float64(p.Left)+0.66*float64(p.Width) {
		tx, anchor = p.X(x)-3, "end"
	}
	fmt.Fprintf(b, `<line class="mark" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="5,3"/><text class="a" x="%.1f" y="%d" fill="%s" text-anchor="%s" stroke="#fff" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
		p.X(x), p.X(x), p.Top, p.Top+p.Height, color, tx, p.Top+p.Height-6-12*i, color, anchor, html.EscapeString(label))
}

// HMark draws a dotted horizontal reference line at y with its label
// above its left end.
func (p Plot) HMark(b *strings.Builder, y float64, label, color string) {
	fmt.Fprintf(b, `<line class="mark" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.2" stroke-dasharray="2,3"/><text class="a" x="%d" y="%.1f" fill="%s" stroke="#fff" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
		p.Left, p.Left+p.Width, p.Y(y), p.Y(y), color, p.Left+4, p.Y(y)-3, color, html.EscapeString(label))
}

// LegendEntry draws a legend entry whose text baseline starts at (x+20,
// y): a 16 px swatch of color, then name. With group set the two are one
// <g class="legend"> element.
func LegendEntry(b *strings.Builder, x, y int, color, name string, group bool) {
	if group {
		b.WriteString(`<g class="legend">`)
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text class="a" x="%d" y="%d">%s</text>`,
		x, x+16, y-4, y-4, color, x+20, y, html.EscapeString(name))
	if group {
		b.WriteString(`</g>`)
	}
	b.WriteString("\n")
}
