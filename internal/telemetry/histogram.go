package telemetry

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Bucket is one cumulative bucket of a classic histogram: Count
// observations were <= UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Quantile is a histogram quantile and the bucket it fell in: the true
// quantile of the observations lies in [Lower, Upper], so two figures
// "agree within the bucket width" when they differ by less than Width().
type Quantile struct {
	Q            float64
	Value        float64 // NaN when there were no observations
	Lower, Upper float64 // the bucket's bounds; Upper is +Inf when the quantile is above the last finite bound
}

// Width is Upper - Lower (+Inf for the +Inf bucket).
func (q Quantile) Width() float64 { return q.Upper - q.Lower }

// HistogramQuantile is Prometheus's histogram_quantile(q, buckets) over
// cumulative buckets (any order; the last bound must be +Inf).
//
// With the buckets sorted by bound and made monotonic (a count below its
// predecessor's is raised to it), N the +Inf bucket's count and rank
// r = q*N, it finds the first bucket b with count c_b >= r and
// interpolates linearly inside it, assuming observations spread evenly
// between its bounds:
//
//	value = l_b + (u_b - l_b) * (r - c_{b-1}) / (c_b - c_{b-1})
//
// where u_b is b's bound, l_b the previous bucket's bound (0 for the first
// bucket when its bound is positive) and c_{b-1} the previous count (0 for
// the first). When b is the +Inf bucket the value is the largest finite
// bound (Upper is then +Inf); when the first bucket's bound is <= 0 the
// value is that bound. q < 0 gives -Inf, q > 1 +Inf; no observations, no
// +Inf bucket or fewer than two buckets give NaN.
func HistogramQuantile(q float64, buckets []Bucket) Quantile {
	out := Quantile{Q: q, Value: math.NaN(), Lower: math.NaN(), Upper: math.NaN()}
	switch {
	case math.IsNaN(q):
		return out
	case q < 0:
		out.Value = math.Inf(-1)
		return out
	case q > 1:
		out.Value = math.Inf(1)
		return out
	}
	b := slices.Clone(buckets)
	slices.SortStableFunc(b, func(x, y Bucket) int { return cmp.Compare(x.UpperBound, y.UpperBound) })
	// Coalesce equal bounds (two series summed with "1" and "1.0"), then
	// enforce monotonicity as Prometheus does for float-precision noise.
	b = coalesce(b)
	for i := 1; i < len(b); i++ {
		b[i].Count = max(b[i].Count, b[i-1].Count)
	}
	if len(b) < 2 || !math.IsInf(b[len(b)-1].UpperBound, 1) {
		return out
	}
	n := b[len(b)-1].Count
	if n == 0 {
		return out
	}
	rank := q * n
	i, _ := slices.BinarySearchFunc(b[:len(b)-1], rank, func(x Bucket, r float64) int {
		if x.Count >= r {
			return 1
		}
		return -1
	})
	if i == len(b)-1 {
		out.Value, out.Lower, out.Upper = b[len(b)-2].UpperBound, b[len(b)-2].UpperBound, math.Inf(1)
		return out
	}
	if i == 0 && b[0].UpperBound <= 0 {
		out.Value, out.Lower, out.Upper = b[0].UpperBound, math.Inf(-1), b[0].UpperBound
		return out
	}
	lower, count := 0.0, b[i].Count
	if i > 0 {
		lower = b[i-1].UpperBound
		count -= b[i-1].Count
		rank -= b[i-1].Count
	}
	out.Lower, out.Upper = lower, b[i].UpperBound
	out.Value = lower + (b[i].UpperBound-lower)*(rank/count)
	return out
}

func coalesce(b []Bucket) []Bucket {
	out := b[:0]
	for _, x := range b {
		if len(out) > 0 && out[len(out)-1].UpperBound == x.UpperBound {
			out[len(out)-1].Count += x.Count
			continue
		}
		out = append(out, x)
	}
	return out
}

// HistogramStat is what one histogram family recorded over a window: the
// per-bucket increase, summed over its series (as sum by (le) would), and
// quantiles of that.
type HistogramStat struct {
	Family        string
	Buckets       []Bucket // cumulative increase per bound, sorted, +Inf last
	Count, Sum    float64  // increase of _count and _sum: observations in the window and their total
	Mean          float64  // Sum / Count; NaN when Count is 0
	P50, P90, P99 Quantile
	FromNs, ToNs  int64 // the scrapes the increase is measured between (the latest start, earliest end over series)
	Resets        int
	Series        int
	OK            bool
}

// Quantile of the window's observations (see HistogramQuantile).
func (h HistogramStat) Quantile(q float64) Quantile { return HistogramQuantile(q, h.Buckets) }

// Histogram measures family at target over w.
//
// Each series (label set without le) is taken over its own scrapes: the
// increase of every bucket between the last scrape at or before w.From
// (the first after it when there is none) and the last at or before w.To,
// summed over consecutive scrapes, where a scrape in which any bucket or
// the count fell is a reset and contributes its own counts (the
// observations since the reset). Without resets this is the bucket-count
// difference between the two end scrapes. Series are then summed by le.
func (d *Data) Histogram(target, family string, w Window) HistogramStat {
	st := HistogramStat{Family: family, Mean: math.NaN()}
	type inst struct {
		buckets []*Series
		count   *Series
		sum     *Series
	}
	insts := map[string]*inst{}
	var order []string
	get := func(s *Series) *inst {
		var k strings.Builder
		for _, l := range s.Labels {
			if l.Name != "le" {
				k.WriteString(l.Name + "=" + l.Value + "\x00")
			}
		}
		in := insts[k.String()]
		if in == nil {
			in = &inst{}
			insts[k.String()] = in
			order = append(order, k.String())
		}
		return in
	}
	for _, s := range d.Find(target, family+"_bucket") {
		in := get(s)
		in.buckets = append(in.buckets, s)
	}
	for _, s := range d.Find(target, family+"_count") {
		get(s).count = s
	}
	for _, s := range d.Find(target, family+"_sum") {
		get(s).sum = s
	}
	byBound := map[float64]float64{}
	for _, k := range order {
		in := insts[k]
		if len(in.buckets) == 0 {
			continue
		}
		inc, sum, from, to, resets, ok := instIncrease(in.buckets, in.count, in.sum, w)
		if !ok {
			continue
		}
		for i, s := range in.buckets {
			ub, err := ParseBound(s.Label("le"))
			if err != nil {
				continue
			}
			byBound[ub] += inc[i]
		}
		st.Count += inc[len(inc)-1]
		st.Sum += sum
		st.Resets += resets
		if !st.OK {
			st.FromNs, st.ToNs = from, to
		} else {
			st.FromNs, st.ToNs = max(st.FromNs, from), min(st.ToNs, to)
		}
		st.OK = true
		st.Series++
	}
	if !st.OK {
		return st
	}
	for ub, c := range byBound {
		st.Buckets = append(st.Buckets, Bucket{ub, c})
	}
	slices.SortFunc(st.Buckets, func(a, b Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	if st.Count > 0 {
		st.Mean = st.Sum / st.Count
	}
	st.P50, st.P90, st.P99 = st.Quantile(0.5), st.Quantile(0.9), st.Quantile(0.99)
	return st
}

// instIncrease is the per-bucket increase of one histogram series over w:
// inc[i] for buckets[i], then the _count's increase last (the +Inf
// bucket's when there is no _count), and the _sum's.
func instIncrease(buckets []*Series, count, sum *Series, w Window) (inc []float64, sumInc float64, from, to int64, resets int, ok bool) {
	cols := slices.Clone(buckets)
	if count != nil {
		cols = append(cols, count)
	} else {
		// the +Inf bucket stands in for the count
		for _, s := range buckets {
			if s.Label("le") == "+Inf" {
				cols = append(cols, s)
			}
		}
		if len(cols) == len(buckets) {
			return nil, 0, 0, 0, 0, false
		}
	}
	hasSum := sum != nil
	if hasSum {
		cols = append(cols, sum)
	}
	// The scrape times of this series: all its columns come from the same
	// scrapes; align them by time.
	var times []int64
	for _, c := range cols {
		for _, p := range c.Points {
			times = append(times, p.TimeNs)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	i0, i1, ok := bounds(func(i int) int64 { return times[i] }, len(times), w)
	if !ok {
		return nil, 0, 0, 0, 0, false
	}
	// vals[k][j]: column j at times[i0+k], NaN when not sampled then.
	n := i1 - i0 + 1
	vals := make([][]float64, n)
	for k := range vals {
		vals[k] = make([]float64, len(cols))
		for j := range vals[k] {
			vals[k][j] = math.NaN()
		}
	}
	for j, c := range cols {
		for _, p := range c.Points {
			if k, found := slices.BinarySearch(times[i0:i1+1], p.TimeNs); found {
				vals[k][j] = p.Value
			}
		}
	}
	counters := len(cols)
	if hasSum {
		counters-- // _sum can fall legitimately (negative observations); it does not signal resets
	}
	acc := make([]float64, len(cols))
	for k := 1; k < n; k++ {
		prev, cur := vals[k-1], vals[k]
		reset := false
		for j := range counters {
			if cur[j] < prev[j] { // false when either is NaN
				reset = true
				break
			}
		}
		if reset {
			resets++
		}
		for j := range cols {
			switch {
			case math.IsNaN(cur[j]):
			case reset:
				acc[j] += cur[j]
			case !math.IsNaN(prev[j]):
				acc[j] += cur[j] - prev[j]
			}
		}
	}
	if hasSum {
		sumInc = acc[len(acc)-1]
		acc = acc[:len(acc)-1]
	}
	return acc, sumInc, times[i0], times[i1], resets, true
}
