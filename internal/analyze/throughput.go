package analyze

import (
	"fmt"
	"slices"
)

// good is vLLM's goodput test: every set SLO holds (value <= SLO); TPOT of
// a request with output_len <= 1 counts as 0.
func (o SLO) good(q *Request) bool {
	const ms = 1e6
	return (o.TTFTms == nil || float64(q.TTFTNs) <= *o.TTFTms*ms) &&
		(o.TPOTms == nil || q.TPOTNs <= *o.TPOTms*ms) &&
		(o.E2ELms == nil || float64(q.E2ELNs) <= *o.E2ELms*ms)
}

// PeakNote explains a peak output throughput below the average output
// throughput, which vLLM's definition gives (it counts stream messages,
// not tokens, in whole 1 s bins from the first start); empty otherwise.
func (s *Summary) PeakNote() string {
	if s.MaxOutputTokensPerS >= s.OutputThroughput || s.Completed == 0 {
		return ""
	}
	why := "its messages carry several tokens each"
	if s.Duration < 1 {
		why = fmt.Sprintf("the run (%.2f s) is shorter than one bin", s.Duration)
	}
	return fmt.Sprintf("peak output throughput %.2f is below the average %.2f tok/s: vLLM's peak counts stream messages (not tokens) in whole 1 s bins from the first start, and %s",
		s.MaxOutputTokensPerS, s.OutputThroughput, why)
}

// peakOutput is vLLM's peak output throughput: the events of successful
// requests (the first at start+TTFT, then one per later message) counted in
// 1 s bins from the earliest successful start; the fullest bin.
func (a *accumulator) peakOutput(succ []*Request) float64 {
	if len(succ) == 0 {
		return 0
	}
	m := succ[0].StartNs
	for _, q := range succ {
		m = min(m, q.StartNs)
	}
	var counts []int64 // 1 s bins from m
	var best int64
	bump := func(b, n int64) {
		b = min(b, maxSeriesBins-1)
		if b >= int64(len(counts)) {
			counts = append(counts, make([]int64, b+1-int64(len(counts)))...)
		}
		counts[b] += n
		best = max(best, counts[b])
	}
	if a.msBins == nil {
		// Each request's events are sorted (validate checks): count a
		// bin's share of them with two binary searches, not one division
		// per event.
		for _, q := range succ {
			if q.NonStreaming {
				continue
			}
			ts := a.eventTimes[q.evOff : q.evOff+int(q.Events)]
			i, _ := slices.BinarySearch(ts, m)
			for i < len(ts) {
				b := (ts[i] - m) / nsPerSec
				if b >= maxSeriesBins-1 { // the rest is clamped into the last bin
					bump(b, int64(len(ts)-i))
					break
				}
				j, _ := slices.BinarySearch(ts[i:], m+(b+1)*nsPerSec)
				bump(b, int64(j))
				i += j
			}
		}
		return float64(best)
	}
	// Approximate: 1 ms counts re-binned from m rounded down to 1 ms.
	m0 := m / 1e6
	for ms, n := range a.msBins {
		if int64(ms) >= m0 && n > 0 {
			bump((int64(ms)-m0)/1000, int64(n))
		}
	}
	return float64(best)
}

// peakConcurrency is vLLM's peak concurrent requests: an exact sweep over
// the intervals [start, start+E2EL) of successful requests, departures
// before arrivals at equal times.
func peakConcurrency(succ []*Request) int {
	starts := make([]int64, len(succ))
	ends := make([]int64, len(succ))
	for i, q := range succ {
		starts[i], ends[i] = q.StartNs, q.StartNs+q.E2ELNs
	}
	slices.Sort(starts)
	slices.Sort(ends)
	cur, best, j := 0, 0, 0
	for _, st := range starts {
		for j < len(ends) && ends[j] <= st {
			cur--
			j++
		}
		cur++
		best = max(best, cur)
	}
	return best
}
