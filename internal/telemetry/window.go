package telemetry

import (
	"math"
	"slices"
)

// Window is a span of the run clock, [From, To] in ns from the run start
// (the times of a recording).
type Window struct {
	From, To int64
}

// All is a window covering any run.
var All = Window{From: math.MinInt64, To: math.MaxInt64}

// bounds returns the indexes of the points a counter's increase over w is
// measured between: i0 the last point at or before From (the first point
// after From when none is; then the increase before it is unknown and not
// counted), i1 the last point at or before To. ok is false when w holds
// fewer than two such points.
func bounds(times func(int) int64, n int, w Window) (i0, i1 int, ok bool) {
	// first index with time > To, minus one
	i1 = searchAfter(times, n, w.To) - 1
	if i1 < 0 {
		return 0, 0, false
	}
	i0 = searchAfter(times, n, w.From) - 1
	if i0 < 0 {
		i0 = 0
	}
	return i0, i1, i1 > i0
}

// searchAfter is the first index whose time is > t (n when none).
func searchAfter(times func(int) int64, n int, t int64) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if times(m) <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func pointTimes(p []Point) func(int) int64 { return func(i int) int64 { return p[i].TimeNs } }

// CounterStat is a counter's change over a window.
type CounterStat struct {
	// Increase is the sum over consecutive samples a, b in [FromNs, ToNs]
	// of b-a, or of b where b < a: a drop is a counter reset (the server
	// restarted), after which the new value is the increase since the
	// reset.
	Increase float64
	// PerSecond is Increase / (ToNs-FromNs) in s. It is not extrapolated to
	// the window's edges (Prometheus's rate() is): FromNs and ToNs are the
	// samples actually used.
	PerSecond      float64
	FromNs, ToNs   int64
	Resets         int
	Series         int  // series summed
	OK             bool // at least two samples in the window
	FirstIsPartial bool // no sample at or before From: the increase before the first one is missing
}

// Counter is the increase and rate of one counter series over w.
func Counter(p []Point, w Window) CounterStat {
	i0, i1, ok := bounds(pointTimes(p), len(p), w)
	if !ok {
		return CounterStat{}
	}
	st := CounterStat{FromNs: p[i0].TimeNs, ToNs: p[i1].TimeNs, OK: true, Series: 1, FirstIsPartial: p[i0].TimeNs > w.From}
	for i := i0 + 1; i <= i1; i++ {
		d := p[i].Value - p[i-1].Value
		if d < 0 {
			d = p[i].Value
			st.Resets++
		}
		st.Increase += d
	}
	if st.ToNs > st.FromNs {
		st.PerSecond = st.Increase / (float64(st.ToNs-st.FromNs) / 1e9)
	}
	return st
}

// SumCounters adds the counters of several series (one per engine, model
// or label value) over w: increases and rates add; FromNs is the latest
// start and ToNs the earliest end among them.
func SumCounters(series []*Series, w Window) CounterStat {
	var sum CounterStat
	for _, s := range series {
		c := Counter(s.Points, w)
		if !c.OK {
			continue
		}
		if !sum.OK {
			sum = c
			continue
		}
		sum.Increase += c.Increase
		sum.PerSecond += c.PerSecond
		sum.Resets += c.Resets
		sum.Series++
		sum.FromNs, sum.ToNs = max(sum.FromNs, c.FromNs), min(sum.ToNs, c.ToNs)
		sum.FirstIsPartial = sum.FirstIsPartial || c.FirstIsPartial
	}
	return sum
}

// GaugeStat summarises a gauge over a window.
type GaugeStat struct {
	N              int     // samples with From <= t <= To
	Min, Mean, Max float64 // over those samples (scrapes are evenly spaced, so Mean is close to the time average)
	Last           float64 // the last sample at or before To
	LastNs         int64
	OK             bool // N > 0
}

// Gauge summarises one series' points over w.
func Gauge(p []Point, w Window) GaugeStat {
	var st GaugeStat
	lo := searchAfter(pointTimes(p), len(p), w.From-1) // first point >= From
	if w.From == math.MinInt64 {
		lo = 0
	}
	hi := searchAfter(pointTimes(p), len(p), w.To) // first point > To
	if hi <= lo {
		return st
	}
	st.N, st.OK = hi-lo, true
	st.Min, st.Max = math.Inf(1), math.Inf(-1)
	var sum float64
	for _, pt := range p[lo:hi] {
		st.Min, st.Max = min(st.Min, pt.Value), max(st.Max, pt.Value)
		sum += pt.Value
	}
	st.Mean = sum / float64(st.N)
	st.Last, st.LastNs = p[hi-1].Value, p[hi-1].TimeNs
	return st
}

// Agg says how the series of one gauge (per engine, per model) combine
// into one value per scrape.
type Agg int

const (
	AggSum  Agg = iota // counts: requests running, waiting
	AggMean            // fractions: KV-cache usage
)

// Combine merges several series into one: at each scrape time present in
// any, the sum (or mean) of the series sampled then.
func Combine(series []*Series, agg Agg) []Point {
	if len(series) == 1 {
		return series[0].Points
	}
	type acc struct {
		sum float64
		n   int
	}
	at := map[int64]*acc{}
	var times []int64
	for _, s := range series {
		for _, p := range s.Points {
			a := at[p.TimeNs]
			if a == nil {
				a = &acc{}
				at[p.TimeNs] = a
				times = append(times, p.TimeNs)
			}
			a.sum += p.Value
			a.n++
		}
	}
	slices.Sort(times)
	out := make([]Point, len(times))
	for i, t := range times {
		a := at[t]
		v := a.sum
		if agg == AggMean {
			v /= float64(a.n)
		}
		out[i] = Point{t, v}
	}
	return out
}
