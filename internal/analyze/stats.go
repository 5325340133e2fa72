package analyze

import (
	"math"
	"slices"

	"github.com/tracekit/tracekit/trace"
)

// Stats are the statistics vLLM reports for one metric, in milliseconds.
type Stats struct {
	Count  int     `json:"count"`
	Mean   float64 `json:"mean_ms"`
	Median float64 `json:"median_ms"`
	Std    float64 `json:"std_ms"` // population std (numpy's default, ddof=0)
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
	// Percentiles are in the order of the requested percentiles.
	Percentiles []Pct `json:"percentiles"`
}

// Pct is one percentile of a distribution.
type Pct struct {
	P     float64 `json:"p"`
	Value float64 `json:"value_ms"`
}

// Percentile is trace.Percentile, numpy's linear percentile, which inspect
// uses too.
func Percentile(sorted []float64, p float64) float64 { return trace.Percentile(sorted, p) }

func lerp(a, b, t float64) float64 { return trace.Lerp(a, b, t) }

// HistRelErr is the relative error of a percentile read from a Dist that
// switched to its histogram.
const HistRelErr = 0.001

// DefaultMaxExactSamples is the per-distribution sample count above which a
// Dist switches to its histogram (16 Mi samples = 128 MiB).
const DefaultMaxExactSamples = 1 << 24

// Dist collects the samples of one metric (in nanoseconds). Below its limit
// it keeps every sample and its statistics are exact; past it, it moves
// them into a logarithmic histogram whose percentiles are within
// HistRelErr of the exact value (mean, std, min, max stay exact up to
// floating point).
type Dist struct {
	limit   int
	samples []float64
	sorted  bool
	hist    *logHist
	// twin, while set, holds this Dist's samples: every sample so far
	// equalled twin's, in order (the per-token ITL of one-token events is
	// the per-event ITL), so they are kept once; see accumulator.addEvents.
	twin *Dist
	// view, while set, holds this Dist's samples as spans of another's.
	view *sampleView
	// keyLo and keyHi bound the sortable keys of the first boundN samples,
	// all written by appendGaps: while that is every sample, summarize
	// counts the radix buckets in its first pass (one pass fewer).
	keyLo, keyHi uint64
	boundN       int
}

// keyBounds bound the sortable keys of some samples, when ok.
type keyBounds struct {
	lo, hi uint64
	ok     bool
}

// bounds are the key bounds of all of d's own samples, when known.
func (d *Dist) bounds() keyBounds {
	return keyBounds{d.keyLo, d.keyHi, d.hist == nil && d.boundN > 0 && d.boundN == len(d.samples)}
}

// appendGaps appends the gaps ts[i] - ts[i-1] (i >= 1) as samples, keeping
// the key bounds while every sample came this way; sorted says no gap was
// negative. The caller checks the limit.
func (d *Dist) appendGaps(ts []int64) (sorted bool) {
	m := len(d.samples)
	known := d.boundN == m
	s := slices.Grow(d.samples, len(ts)-1)[:m+len(ts)-1]
	g := s[m:]
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range g {
		gap := ts[i+1] - ts[i]
		lo, hi = min(lo, gap), max(hi, gap)
		g[i] = float64(gap)
	}
	d.samples, d.sorted = s, false
	if len(g) == 0 {
		return true
	}
	if known { // float64 of an int64 keeps its order: the keys of lo and hi bound the rest
		klo, khi := sortableKey(float64(lo)), sortableKey(float64(hi))
		if m > 0 {
			klo, khi = min(klo, d.keyLo), max(khi, d.keyHi)
		}
		d.keyLo, d.keyHi, d.boundN = klo, khi, len(s)
	}
	return lo >= 0
}

// sampleView is a Dist's samples held as spans of another Dist's samples,
// in order: the decode-only ITL is the per-event ITL less each stream's
// first gap, so while every stream's gaps go to one per-event Dist it is
// kept as spans of those (accumulator.addEvents), not copied. The viewed
// samples only grow while viewed (not sorted, not moved to a histogram:
// the accumulator materializes the view first).
type sampleView struct {
	of    *Dist
	spans []span
	n     int
}

// addSpan adds of's samples [from, to) to d's view of them, starting one
// if d holds no sample yet; false when d cannot (it holds samples of its
// own, views another Dist, or would pass its limit), and then the caller
// materializes d and adds the samples as usual.
func (d *Dist) addSpan(of *Dist, from, to int) bool {
	switch {
	case d.view == nil && (d.hist != nil || len(d.samples) > 0),
		d.view != nil && d.view.of != of,
		d.Len()+to-from > d.limit:
		return false
	}
	if d.view == nil {
		d.view = &sampleView{of: of}
	}
	v := d.view
	v.spans = append(v.spans, span{from, to})
	v.n += to - from
	return true
}

// materialize copies a view's samples into d's own.
func (d *Dist) materialize() {
	v := d.view
	if v == nil {
		return
	}
	d.view = nil
	d.samples = slices.Grow(d.samples[:0], v.n)
	for _, sp := range v.spans {
		d.samples = append(d.samples, v.of.samples[sp.from:sp.to]...)
	}
	d.sorted = false
}

// untwin gives d its own copy of the samples it shares with its twin,
// with the twin's room (presized for the run's events).
func (d *Dist) untwin() {
	if d.twin == nil {
		return
	}
	t := d.twin.samples
	d.samples = append(slices.Grow(d.samples[:0], cap(t)), t...)
	d.twin = nil
}

// sameAs reports whether d's samples are o's (an aliased twin).
func (d *Dist) sameAs(o *Dist) bool {
	return d.hist == nil && o.hist == nil && len(d.samples) == len(o.samples) && len(d.samples) > 0 && &d.samples[0] == &o.samples[0]
}

func newDist(limit int) *Dist {
	if limit <= 0 {
		limit = DefaultMaxExactSamples
	}
	return &Dist{limit: limit}
}

// Add records one sample.
func (d *Dist) Add(v float64) {
	d.materialize()
	if d.hist == nil {
		if len(d.samples) < d.limit {
			d.samples = append(d.samples, v)
			d.sorted = false
			return
		}
		d.hist = newLogHist()
		for _, s := range d.samples {
			d.hist.add(s)
		}
		d.samples = nil
	}
	d.hist.add(v)
}

// addGaps adds the gaps ts[i] - ts[i-1] for i >= from (from >= 1): one
// append per gap while the samples are exact.
func (d *Dist) addGaps(ts []int64, from int) {
	if from >= len(ts) {
		return
	}
	d.materialize()
	if d.hist == nil && len(d.samples)+len(ts)-from <= d.limit {
		s := d.samples
		for i := from; i < len(ts); i++ {
			s = append(s, float64(ts[i]-ts[i-1]))
		}
		d.samples, d.sorted = s, false
		return
	}
	for i := from; i < len(ts); i++ {
		d.Add(float64(ts[i] - ts[i-1]))
	}
}

// addGapsIn adds the gaps ts[j] - ts[j-1] that end in [from, to) and
// returns how many events of ts are in it.
func (d *Dist) addGapsIn(ts []int64, from, to int64) int {
	d.materialize()
	k := 0
	if d.hist == nil && len(d.samples)+len(ts) <= d.limit {
		s := d.samples
		for j, t := range ts {
			if t >= from && t < to {
				k++
				if j > 0 {
					s = append(s, float64(t-ts[j-1]))
				}
			}
		}
		d.samples, d.sorted = s, false
		return k
	}
	for j, t := range ts {
		if t >= from && t < to {
			k++
			if j > 0 {
				d.Add(float64(t - ts[j-1]))
			}
		}
	}
	return k
}

// Len is the number of samples added.
func (d *Dist) Len() int {
	if d.hist != nil {
		return int(d.hist.n)
	}
	if d.view != nil {
		return d.view.n
	}
	return len(d.samples)
}

// Approximate reports whether percentiles come from the histogram.
func (d *Dist) Approximate() bool { return d.hist != nil }

func (d *Dist) sort() {
	d.materialize()
	if !d.sorted {
		slices.Sort(d.samples)
		d.sorted = true
	}
}

// Quantile returns percentile p (0..100) in nanoseconds.
func (d *Dist) Quantile(p float64) float64 {
	if d.hist != nil {
		return d.hist.percentile(p)
	}
	d.sort()
	return Percentile(d.samples, p)
}

// Stats computes the statistics in milliseconds, numpy style: mean,
// population std (two-pass), median and the linear percentiles ps. An
// empty Dist gives zeros, as vLLM's `np.mean(x or 0)` does. Exact samples
// are not sorted: summarize finds the needed order statistics (min and max
// among them) in the same two passes as the mean and variance.
func (d *Dist) Stats(ps []float64) Stats {
	const ms = 1e6
	st := Stats{Count: d.Len(), Percentiles: make([]Pct, len(ps))}
	if d.hist != nil {
		h := d.hist
		for i, p := range ps {
			st.Percentiles[i] = Pct{P: p, Value: h.percentile(p) / ms}
		}
		st.Median = h.percentile(50) / ms
		if h.n > 0 {
			st.Mean, st.Std = h.mean/ms, math.Sqrt(h.m2/float64(h.n))/ms
			st.Min, st.Max = h.min/ms, h.max/ms
		}
		return st
	}
	for i, p := range ps {
		st.Percentiles[i].P = p
	}
	n := d.Len()
	if n == 0 {
		return st
	}
	// Ranks 0 and n-1 are the min and max.
	ranks := []int{0, n - 1}
	for _, p := range append([]float64{50}, ps...) {
		lo := rankOf(n, p)
		ranks = append(ranks, lo, min(lo+1, n-1))
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	var vals []float64
	var mean, ss float64
	switch {
	case d.view != nil: // within the viewed samples' bounds
		vals, mean, ss = summarizeSpans(d.view.of.samples, d.view.spans, ranks, d.view.of.bounds())
	case d.sorted:
		for _, r := range ranks {
			vals = append(vals, d.samples[r])
		}
		mean = sum(d.samples) / float64(n)
		for _, v := range d.samples {
			ss += (v - mean) * (v - mean)
		}
	default:
		vals, mean, ss = summarizeSpans(d.samples, []span{{0, n}}, ranks, d.bounds())
	}
	at := func(r int) float64 { i, _ := slices.BinarySearch(ranks, r); return vals[i] }
	q := func(p float64) float64 {
		h := float64(n-1) * p / 100
		lo := rankOf(n, p)
		if lo >= n-1 {
			return at(n - 1)
		}
		return lerp(at(lo), at(lo+1), h-float64(lo))
	}
	st.Median = q(50) / ms
	for i, p := range ps {
		st.Percentiles[i].Value = q(p) / ms
	}
	lo, hi := at(0), at(n-1)
	st.Mean = mean / ms
	st.Std = math.Sqrt(ss/float64(n)) / ms
	st.Min, st.Max = lo/ms, hi/ms
	return st
}

// rankOf is the lower rank numpy's linear percentile reads: floor((n-1)p/100).
func rankOf(n int, p float64) int {
	return min(max(int(math.Floor(float64(n-1)*p/100)), 0), n-1)
}

// sum adds in four lanes (pairwise-like error, and fast).
func sum(xs []float64) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		s0 += xs[i]
		s1 += xs[i+1]
		s2 += xs[i+2]
		s3 += xs[i+3]
	}
	for ; i < len(xs); i++ {
		s0 += xs[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// logHist is a DDSketch-style histogram: bucket i holds values in
// (gamma^(i-1), gamma^i] with gamma = (1+a)/(1-a), so the bucket's
// representative 2*gamma^i/(gamma+1) is within a = HistRelErr of any value
// in it. Values below 1 ns (0, or negative from clock steps) share bucket
// "zero". Mean and variance use Welford's update.
type logHist struct {
	counts   []int64
	zero     int64
	n        int64
	mean, m2 float64
	min, max float64
	lnGamma  float64
	gamma    float64
}

func newLogHist() *logHist {
	g := (1 + HistRelErr) / (1 - HistRelErr)
	return &logHist{gamma: g, lnGamma: math.Log(g), min: math.Inf(1), max: math.Inf(-1)}
}

func (h *logHist) add(v float64) {
	h.n++
	delta := v - h.mean
	h.mean += delta / float64(h.n)
	h.m2 += delta * (v - h.mean)
	h.min, h.max = min(h.min, v), max(h.max, v)
	if v < 1 {
		h.zero++
		return
	}
	i := int(math.Ceil(math.Log(v) / h.lnGamma))
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]int64, i+1-len(h.counts))...)
	}
	h.counts[i]++
}

// value returns the representative of the sample with rank r (0-based).
func (h *logHist) value(r int64) float64 {
	if r < h.zero {
		return max(h.min, 0)
	}
	r -= h.zero
	for i, c := range h.counts {
		if r < c {
			v := 2 * math.Pow(h.gamma, float64(i)) / (h.gamma + 1)
			return min(max(v, h.min), h.max)
		}
		r -= c
	}
	return h.max
}

func (h *logHist) percentile(p float64) float64 {
	if h.n == 0 {
		return 0
	}
	x := float64(h.n-1) * p / 100
	lo := int64(math.Floor(x))
	if lo >= h.n-1 {
		return h.max
	}
	return lerp(h.value(lo), h.value(lo+1), x-float64(lo))
}
