package sweep

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"path"
	"strings"
)

// CompareRow is one headline figure of two sweeps. Better is +1 when B's
// value is better than A's, -1 when worse, 0 when equal or missing.
type CompareRow struct {
	Name   string  `json:"name"`
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	Pct    float64 `json:"pct"` // 100 (B - A) / A; 0 when A is 0
	Better int     `json:"better"`
	Valid  bool    `json:"valid"` // both sweeps have the figure
}

// Compare lists the headline figures of two sweeps: the SLO answer (as
// each axis' load when the axes agree, and as offered conversations per
// second and served requests per second, which compare across the speed
// and rate axes), the knee and the highest throughput. Higher is better
// for all of them.
func Compare(a, b *Summary) []CompareRow {
	var rows []CompareRow
	add := func(name string, x, y float64, ok bool) {
		r := CompareRow{Name: name, A: x, B: y, Valid: ok}
		if ok && x != 0 {
			r.Pct = 100 * (y - x) / math.Abs(x)
		}
		if ok && y != x {
			r.Better = map[bool]int{true: 1, false: -1}[y > x]
		}
		rows = append(rows, r)
	}
	aa, ba := a.Answer, b.Answer
	bothAnswers := aa != nil && ba != nil && aa.Found && ba.Found
	get := func(an *Answer, f func(*Answer) float64) float64 {
		if an == nil || !an.Found {
			return 0
		}
		return f(an)
	}
	if a.Plan.Axis == b.Plan.Axis {
		add("SLO answer ("+string(a.Plan.Axis)+")", get(aa, func(x *Answer) float64 { return x.Load }), get(ba, func(x *Answer) float64 { return x.Load }), bothAnswers)
	}
	add("SLO answer (offered conversations/s)", get(aa, func(x *Answer) float64 { return x.OfferedConvRate }), get(ba, func(x *Answer) float64 { return x.OfferedConvRate }),
		bothAnswers && aa.OfferedConvRate > 0 && ba.OfferedConvRate > 0)
	add("SLO answer (served req/s)", get(aa, func(x *Answer) float64 { return x.Throughput }), get(ba, func(x *Answer) float64 { return x.Throughput }), bothAnswers)
	kt := func(s *Summary) float64 {
		if s.Knee == nil {
			return 0
		}
		return s.Knee.Throughput
	}
	mt := func(s *Summary) float64 {
		if s.Knee == nil {
			return 0
		}
		return s.Knee.MaxThroughput
	}
	add("knee throughput (req/s)", kt(a), kt(b), a.Knee != nil && b.Knee != nil)
	add("highest throughput (req/s)", mt(a), mt(b), a.Knee != nil && b.Knee != nil)
	return rows
}

// cells are a row's A, B and change as both pages show them: "-" for a
// figure a sweep does not have (no knee), "n/a" for a change that cannot
// be computed.
func (r CompareRow) cells() (a, b, change string) {
	a, b, change = "-", "-", "n/a"
	if r.Valid || r.A != 0 {
		a = FormatValue(r.A)
	}
	if r.Valid || r.B != 0 {
		b = FormatValue(r.B)
	}
	if r.Valid && r.A != 0 {
		change = fmt.Sprintf("%+.1f%%", r.Pct)
		if r.Better > 0 {
			change += " better"
		} else if r.Better < 0 {
			change += " worse"
		}
	}
	return a, b, change
}

// WriteCompare prints Compare(a, b) and both step tables.
func WriteCompare(w io.Writer, a, b *Summary, nameA, nameB string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "tracekit sweep compare\nA: %s\nB: %s\n", nameA, nameB)
	fmt.Fprintf(bw, "%-40s %12s %12s %10s\n", "figure", "A", "B", "change")
	for _, r := range Compare(a, b) {
		av, bv, ch := r.cells()
		fmt.Fprintf(bw, "%-40s %12s %12s %s\n", r.Name, av, bv, ch)
	}
	fmt.Fprintf(bw, "A answer: %s\nB answer: %s\n", a.AnswerLine(), b.AnswerLine())
	for _, x := range []struct {
		name string
		s    *Summary
	}{{"A: " + nameA, a}, {"B: " + nameB, b}} {
		fmt.Fprintf(bw, "\n== %s ==\n", x.name)
		if err := x.s.WriteText(bw); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// commonX picks the load axis of a comparison chart: the measured offered
// request rate when every step of both has one, else the load value when
// the axes agree, else the offered conversation rate.
func commonX(a, b *Summary) (func(*StepResult) float64, string) {
	xa, la := a.xOf()
	if _, lb := b.xOf(); la == lb {
		return xa, la
	}
	return func(r *StepResult) float64 { return r.OfferedConvRate }, "offered conversations/s"
}

// WriteCompareHTML writes one offline page with both sweeps' curves on
// shared charts (A solid blue tones, B red tones), the headline table, and
// links to each sweep's own page (hrefA, hrefB; empty for none).
func WriteCompareHTML(w io.Writer, a, b *Summary, nameA, nameB, hrefA, hrefB string) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, pageHead, "tracekit sweep compare")
	sb.WriteString("<h1>tracekit sweep compare</h1>\n<ul>\n")
	for _, x := range []struct{ tag, name, href string }{{"A", nameA, hrefA}, {"B", nameB, hrefB}} {
		link := html.EscapeString(x.name)
		if x.href != "" {
			link = `<a href="` + html.EscapeString(x.href) + `">` + link + `</a>`
		}
		fmt.Fprintf(&sb, "<li>%s: %s</li>\n", x.tag, link)
	}
	sb.WriteString("</ul>\n<table><tr><th>figure</th><th>A</th><th>B</th><th>change</th></tr>\n")
	for _, r := range Compare(a, b) {
		av, bv, ch := r.cells()
		fmt.Fprintf(&sb, "<tr><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", html.EscapeString(r.Name), av, bv, html.EscapeString(ch))
	}
	sb.WriteString("</table>\n")
	fmt.Fprintf(&sb, "<p>A answer: %s<br>B answer: %s</p>\n", html.EscapeString(a.AnswerLine()), html.EscapeString(b.AnswerLine()))
	x, xl := commonX(a, b)
	ca := a.charts("A ", []string{"#17becf", "#1f77b4", "#08306b"}, x, xl)
	cb := b.charts("B ", []string{"#ff9896", "#d62728", "#67000d"}, x, xl)
	sb.WriteString("<div class=\"grid\">\n")
	for i := range ca {
		c := ca[i]
		c.title = strings.Replace(c.title, " vs ", " (A and B) vs ", 1)
		if i < len(cb) {
			c.series = append(c.series, cb[i].series...)
		}
		c.render(&sb)
	}
	sb.WriteString("</div>\n")
	for _, x := range []struct {
		name, href string
		s          *Summary
	}{{"A: " + nameA, hrefA, a}, {"B: " + nameB, hrefB, b}} {
		fmt.Fprintf(&sb, "<h2>%s</h2>\n", html.EscapeString(x.name))
		base := ""
		if x.href != "" {
			base = path.Dir(x.href) + "/"
		}
		x.s.writeStepTable(&sb, base)
	}
	sb.WriteString("</body></html>\n")
	_, err := io.WriteString(w, sb.String())
	return err
}
