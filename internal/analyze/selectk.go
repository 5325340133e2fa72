package analyze

import (
	"math"
	"math/bits"
	"slices"
)

// orderStats returns the values of a at the given ranks (0-based positions
// in ascending order, each in [0, len(a)), ascending) without sorting or
// modifying a.
//
// It is a most-significant-digit radix select on the float64 bit pattern
// (mapped so unsigned order equals numeric order), with digits cut from the
// samples' own key range rather than from fixed bit positions: latency
// samples share their sign, exponent and leading mantissa bits, so fixed
// top bits would put most of them in a few buckets, while the range split
// in up to 2^radixBits buckets leaves each wanted bucket a small share of
// them. One counting pass finds the bucket of each rank, a second copies
// only those buckets out, and the copies are resolved the same way within
// their bucket's range (or sorted once small). The cost is three linear
// passes (the range, the counts, the copy) against O(n log n) for a sort of
// tens of millions of ITL samples.
func orderStats(a []float64, ranks []int) []float64 {
	out := make([]float64, len(ranks))
	if len(a) <= radixSmall {
		sortedAt(a, ranks, out)
		return out
	}
	lo, hi := keyRange(a)
	orderStatsIn(a, ranks, out, lo, hi)
	return out
}

// sortableKey maps a float64 to a uint64 whose unsigned order is the
// numeric order (negative values included): the sign bit flipped for a
// positive value, every bit for a negative one. Branch-free.
func sortableKey(f float64) uint64 {
	b := math.Float64bits(f)
	return b ^ (uint64(int64(b)>>63) | 1<<63)
}

// keyFloat is sortableKey's inverse.
func keyFloat(k uint64) float64 {
	return math.Float64frombits(k ^ (uint64(int64(^k)>>63) | 1<<63))
}

const (
	radixSmall = 2048 // below this, sort a copy
	radixBits  = 12   // 4,096 buckets: the counts (16 KiB) and the wanted-bucket table stay in L1
)

// keyRange is the least and greatest key of a (not empty).
func keyRange(a []float64) (lo, hi uint64) {
	lo, hi = math.MaxUint64, 0
	for _, v := range a {
		k := sortableKey(v)
		lo, hi = min(lo, k), max(hi, k)
	}
	return lo, hi
}

// level is one radix level over keys in [lo, lo + buckets<<shift): a
// sample's bucket is (key - lo) >> shift.
type level struct {
	lo    uint64
	shift uint
	n     int // buckets
}

// levelOf cuts [lo, hi] into buckets for n samples: two to four per
// sample, at most 2^radixBits.
func levelOf(lo, hi uint64, n int) level {
	b := min(radixBits, bits.Len(uint(n))+1)
	shift := uint(max(bits.Len64(hi-lo)-b, 0))
	return level{lo: lo, shift: shift, n: int((hi-lo)>>shift) + 1}
}

func (l level) bucket(v float64) int { return int((sortableKey(v) - l.lo) >> l.shift) }

// sortedAt writes the ranks of a, sorted in a copy, to out.
func sortedAt(a []float64, ranks []int, out []float64) {
	s := slices.Clone(a)
	slices.Sort(s)
	for i, r := range ranks {
		out[i] = s[r]
	}
}

// orderStatsIn is orderStats for samples whose keys lie in [lo, hi].
func orderStatsIn(a []float64, ranks []int, out []float64, lo, hi uint64) {
	switch {
	case lo == hi: // one value
		for i := range ranks {
			out[i] = keyFloat(lo)
		}
		return
	case len(a) <= radixSmall:
		sortedAt(a, ranks, out)
		return
	}
	l := levelOf(lo, hi, len(a))
	counts := make([]int32, l.n)
	for _, v := range a {
		counts[l.bucket(v)]++
	}
	sel := newSelection(counts, ranks)
	sel.keep(a, l)
	sel.resolve(out, l, hi)
}

// selection is one radix level: the buckets holding the wanted ranks, and
// their elements once collected.
type selection struct {
	groups []*group
	slot   []uint16 // bucket -> 1 + index in groups; 0: not wanted
}

type group struct {
	bucket int
	ranks  []int // within the bucket
	idx    []int // positions in out
	elems  []float64
}

// newSelection groups ascending ranks by the bucket holding them, given the
// buckets' counts.
func newSelection(counts []int32, ranks []int) *selection {
	s := &selection{slot: make([]uint16, len(counts))}
	b, start := 0, 0 // bucket b holds ranks [start, start+counts[b])
	for i, r := range ranks {
		for r >= start+int(counts[b]) {
			start += int(counts[b])
			b++
		}
		if s.slot[b] == 0 {
			s.groups = append(s.groups, &group{bucket: b, elems: make([]float64, 0, counts[b])})
			s.slot[b] = uint16(len(s.groups)) // at most one group per rank, and ranks are few: fits
		}
		g := s.groups[s.slot[b]-1]
		g.ranks = append(g.ranks, r-start)
		g.idx = append(g.idx, i)
	}
	return s
}

// keep collects the samples of xs whose bucket is wanted.
func (s *selection) keep(xs []float64, l level) {
	slot, lo, shift := s.slot, l.lo, l.shift // in registers: the appends may write anywhere
	for _, v := range xs {
		if k := slot[(sortableKey(v)-lo)>>shift]; k != 0 {
			g := s.groups[k-1]
			g.elems = append(g.elems, v)
		}
	}
}

// keepSquares is keep that also adds the squared deviations of xs from
// mean to ss, in order: one pass for both.
func (s *selection) keepSquares(xs []float64, l level, mean, ss float64) float64 {
	slot, lo, shift := s.slot, l.lo, l.shift
	for _, v := range xs {
		ss += (v - mean) * (v - mean)
		if k := slot[(sortableKey(v)-lo)>>shift]; k != 0 {
			g := s.groups[k-1]
			g.elems = append(g.elems, v)
		}
	}
	return ss
}

// resolve finds each group's ranks among its elements, within its bucket's
// range (hi bounds the last bucket), and writes them to out.
func (s *selection) resolve(out []float64, l level, hi uint64) {
	for _, g := range s.groups {
		sub := make([]float64, len(g.ranks))
		blo := l.lo + uint64(g.bucket)<<l.shift
		bhi := min(hi, blo+(uint64(1)<<l.shift-1))
		orderStatsIn(g.elems, g.ranks, sub, blo, bhi)
		for i, k := range g.idx {
			out[k] = sub[i]
		}
	}
}

// span is the samples [from, to) of a slice.
type span struct{ from, to int }

// summarize is Stats' passes over unsorted samples: the first adds them up
// (in sum's order, so the mean is the same to the bit) while finding their
// key range, the second sums squared deviations from the mean in sample
// order (numpy's two-pass variance) while counting the radix buckets of
// that range, the third collects the buckets of the wanted ranks, which
// are then resolved as orderStats does. ranks must be ascending and
// include 0 and n-1 (min and max).
func summarize(a []float64, ranks []int) (vals []float64, mean, ss float64) {
	return summarizeSpans(a, []span{{0, len(a)}}, ranks, keyBounds{})
}

// summarizeSpans is summarize of the samples a[sp.from:sp.to] of each
// span in turn, as if they were copied out one after another (a Dist that
// views parts of another's samples: see sampleView). Not empty. When b
// bounds the samples' keys, the first pass counts the radix buckets of
// that range and the second collects the wanted ones: two passes.
func summarizeSpans(a []float64, spans []span, ranks []int, b keyBounds) (vals []float64, mean, ss float64) {
	n := 0
	for _, sp := range spans {
		n += sp.to - sp.from
	}
	if n <= radixSmall {
		all := make([]float64, 0, n)
		for _, sp := range spans {
			all = append(all, a[sp.from:sp.to]...)
		}
		vals = orderStats(all, ranks)
		mean = sum(all) / float64(n)
		for _, v := range all {
			ss += (v - mean) * (v - mean)
		}
		return vals, mean, ss
	}
	var (
		l      level
		counts []int32 // counted in the first pass when the range is known
	)
	if b.ok && b.lo < b.hi {
		l = levelOf(b.lo, b.hi, n)
		counts = make([]int32, l.n)
	}
	// sum's lanes over the whole sequence: sample g goes to lane g%4 while
	// a whole group of four remains, the last n%4 to lane 0.
	var s0, s1, s2, s3 float64
	lo, hi := uint64(math.MaxUint64), uint64(0)
	body, g := n-n%4, 0
	for _, sp := range spans {
		x := a[sp.from:sp.to]
		for i := 0; i < len(x); {
			if g&3 == 0 && g+4 <= body && i+4 <= len(x) { // a whole group of four
				x0, x1, x2, x3 := x[i], x[i+1], x[i+2], x[i+3]
				s0 += x0
				s1 += x1
				s2 += x2
				s3 += x3
				k0, k1, k2, k3 := sortableKey(x0), sortableKey(x1), sortableKey(x2), sortableKey(x3)
				lo, hi = min(lo, k0, k1, k2, k3), max(hi, k0, k1, k2, k3)
				if counts != nil {
					counts[(k0-l.lo)>>l.shift]++
					counts[(k1-l.lo)>>l.shift]++
					counts[(k2-l.lo)>>l.shift]++
					counts[(k3-l.lo)>>l.shift]++
				}
				i, g = i+4, g+4
				continue
			}
			v := x[i] // a group split between spans, or the last n%4
			switch {
			case g >= body || g&3 == 0:
				s0 += v
			case g&3 == 1:
				s1 += v
			case g&3 == 2:
				s2 += v
			default:
				s3 += v
			}
			k := sortableKey(v)
			lo, hi = min(lo, k), max(hi, k)
			if counts != nil {
				counts[(k-l.lo)>>l.shift]++
			}
			i, g = i+1, g+1
		}
	}
	mean = ((s0 + s1) + (s2 + s3)) / float64(n)
	vals = make([]float64, len(ranks))
	if lo == hi {
		for _, sp := range spans {
			for _, v := range a[sp.from:sp.to] {
				ss += (v - mean) * (v - mean)
			}
		}
		for i := range vals {
			vals[i] = keyFloat(lo)
		}
		return vals, mean, ss
	}
	if counts != nil { // the buckets are counted: collect while summing squares
		sel := newSelection(counts, ranks)
		for _, sp := range spans {
			ss = sel.keepSquares(a[sp.from:sp.to], l, mean, ss)
		}
		sel.resolve(vals, l, b.hi)
		return vals, mean, ss
	}
	l = levelOf(lo, hi, n)
	counts = make([]int32, l.n)
	for _, sp := range spans {
		for _, v := range a[sp.from:sp.to] {
			ss += (v - mean) * (v - mean)
			counts[l.bucket(v)]++
		}
	}
	sel := newSelection(counts, ranks)
	for _, sp := range spans {
		sel.keep(a[sp.from:sp.to], l)
	}
	sel.resolve(vals, l, hi)
	return vals, mean, ss
}
