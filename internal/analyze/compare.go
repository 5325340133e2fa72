package analyze

import (
	"bufio"
	"fmt"
	"io"
	"math"
)

// CompareRow is one metric of two runs.
type CompareRow struct {
	Name string  `json:"name"`
	A    float64 `json:"a"`
	B    float64 `json:"b"`
	// Delta is B - A; Pct is 100*(B-A)/A, NaN-free (0 when A is 0).
	Delta float64 `json:"delta"`
	Pct   float64 `json:"pct"`
	// Better is +1 when B is better than A, -1 when worse, 0 when equal or
	// when neither direction is better (counts, durations).
	Better int `json:"better"`

	count bool // a whole number (requests, tokens): printed without decimals
}

// Compare lists the headline metrics of two runs side by side. Both should
// be analyzed with the same Options; the metrics and percentiles of a are
// used.
func Compare(a, b *Summary) []CompareRow {
	var rows []CompareRow
	add := func(name string, x, y float64, dir int) {
		r := CompareRow{Name: name, A: x, B: y, Delta: y - x}
		if x != 0 {
			r.Pct = 100 * (y - x) / math.Abs(x)
		}
		switch {
		case dir == 0 || y == x:
		case (y > x) == (dir > 0):
			r.Better = 1
		default:
			r.Better = -1
		}
		rows = append(rows, r)
	}
	addCount := func(name string, x, y int64, dir int) {
		add(name, float64(x), float64(y), dir)
		rows[len(rows)-1].count = true
	}
	const higher, lower, neutral = 1, -1, 0
	addCount("Successful requests", int64(a.Completed), int64(b.Completed), neutral)
	addCount("Failed requests", int64(a.Failed), int64(b.Failed), lower)
	add("Benchmark duration (s)", a.Duration, b.Duration, neutral)
	addCount("Total input tokens", a.TotalInput, b.TotalInput, neutral)
	addCount("Total generated tokens", a.TotalOutput, b.TotalOutput, neutral)
	add("Request throughput (req/s)", a.RequestThroughput, b.RequestThroughput, higher)
	if !a.Options.Goodput.IsZero() {
		add("Request goodput (req/s)", a.RequestGoodput, b.RequestGoodput, higher)
	}
	add("Output token throughput (tok/s)", a.OutputThroughput, b.OutputThroughput, higher)
	add("Peak output token throughput (tok/s)", a.MaxOutputTokensPerS, b.MaxOutputTokensPerS, higher)
	addCount("Peak concurrent requests", int64(a.MaxConcurrentRequests), int64(b.MaxConcurrentRequests), neutral)
	add("Total token throughput (tok/s)", a.TotalTokenThroughput, b.TotalTokenThroughput, higher)
	for _, m := range metricInfo {
		if !a.Options.hasMetric(m.key) {
			continue
		}
		sa, sb := a.metric(m.key), b.metric(m.key)
		add("Mean "+m.name+" (ms)", sa.Mean, sb.Mean, lower)
		add("Median "+m.name+" (ms)", sa.Median, sb.Median, lower)
		for i, p := range sa.Percentiles {
			if i < len(sb.Percentiles) {
				add("P"+pWord(p.P)+" "+m.name+" (ms)", p.Value, sb.Percentiles[i].Value, lower)
			}
		}
	}
	add("Mean E2EL from intended (ms)", a.CorrectedE2EL.Mean, b.CorrectedE2EL.Mean, lower)
	add("Mean queue time (ms)", a.Queue.Mean, b.Queue.Mean, lower)
	add("Cache hit rate (%)", 100*a.Cache.HitRatio, 100*b.Cache.HitRatio, higher)
	return rows
}

// WriteCompare prints Compare(a, b) as a table named by nameA and nameB.
func WriteCompare(w io.Writer, a, b *Summary, nameA, nameB string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, center(" Comparison ", '=', 98))
	fmt.Fprintf(bw, "A: %s\nB: %s\n", nameA, nameB)
	fmt.Fprintf(bw, "%-40s %14s %14s %14s %10s\n", "metric", "A", "B", "B - A", "change")
	for _, r := range Compare(a, b) {
		pct := "n/a"
		if r.A != 0 {
			pct = fmt.Sprintf("%+.2f%%", r.Pct)
		}
		mark := ""
		switch r.Better {
		case 1:
			mark = " better"
		case -1:
			mark = " worse"
		}
		if r.count {
			fmt.Fprintf(bw, "%-40s %14.0f %14.0f %+14.0f %10s%s\n", r.Name, r.A, r.B, r.Delta, pct, mark)
		} else {
			fmt.Fprintf(bw, "%-40s %14.2f %14.2f %+14.2f %10s%s\n", r.Name, r.A, r.B, r.Delta, pct, mark)
		}
	}
	fmt.Fprintln(bw, "==================================================================================================")
	return bw.Flush()
}
