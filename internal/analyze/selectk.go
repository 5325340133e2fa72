package analyze

import (
	"math"
	"slices"
)

// orderStats returns the values of a at the given ranks (0-based positions
// in ascending order, each in [0, len(a)), ascending) without sorting or
// modifying a.
//
// It is a most-significant-digit radix select on the float64 bit pattern
// (mapped so unsigned order equals numeric order): one counting pass over 16
// bits of the key finds the bucket of each rank, a second pass copies only
// those buckets out, and the copies are resolved on the next 16 bits (or
// sorted once small). Latency samples cluster in few buckets, so the cost is
// about two linear passes, against O(n log n) for a sort of tens of
// millions of ITL samples.
func orderStats(a []float64, ranks []int) []float64 {
	out := make([]float64, len(ranks))
	orderStatsAt(a, ranks, out, 48)
	return out
}

// sortableKey maps a float64 to a uint64 whose unsigned order is the
// numeric order (negative values included).
func sortableKey(f float64) uint64 {
	b := math.Float64bits(f)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

const (
	radixSmall  = 2048 // below this, sort a copy
	radixBits   = 16
	radixDigits = 1 << radixBits
)

func digit(v float64, shift uint) int { return int(sortableKey(v)>>shift) & (radixDigits - 1) }

func orderStatsAt(a []float64, ranks []int, out []float64, shift uint) {
	if len(a) <= radixSmall {
		s := slices.Clone(a)
		slices.Sort(s)
		for i, r := range ranks {
			out[i] = s[r]
		}
		return
	}
	counts := make([]int32, radixDigits)
	for _, v := range a {
		counts[digit(v, shift)]++
	}
	sel := newSelection(counts, ranks)
	for _, v := range a {
		sel.keep(v, shift)
	}
	sel.resolve(out, shift)
}

// selection is one radix level: the buckets holding the wanted ranks, and
// their elements once collected.
type selection struct {
	groups []*group
	slot   []uint16 // bucket -> 1 + index in groups; 0: not wanted
}

type group struct {
	ranks []int // within the bucket
	idx   []int // positions in out
	elems []float64
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
			s.groups = append(s.groups, &group{elems: make([]float64, 0, counts[b])})
			s.slot[b] = uint16(len(s.groups)) // at most one group per bucket: fits
		}
		g := s.groups[s.slot[b]-1]
		g.ranks = append(g.ranks, r-start)
		g.idx = append(g.idx, i)
	}
	return s
}

// keep collects v if its bucket is wanted.
func (s *selection) keep(v float64, shift uint) {
	if k := s.slot[digit(v, shift)]; k != 0 {
		g := s.groups[k-1]
		g.elems = append(g.elems, v)
	}
}

// resolve finds each group's ranks among its elements (the next digit
// down) and writes them to out.
func (s *selection) resolve(out []float64, shift uint) {
	for _, g := range s.groups {
		sub := make([]float64, len(g.ranks))
		if shift == 0 { // every element of the bucket has the same bits
			for i := range sub {
				sub[i] = g.elems[0]
			}
		} else {
			orderStatsAt(g.elems, g.ranks, sub, shift-radixBits)
		}
		for i, k := range g.idx {
			out[k] = sub[i]
		}
	}
}

// summarize is Stats' two passes over unsorted samples: the first adds
// them up (in sum's order, so the mean is the same to the bit) while
// counting the top radix digit, the second sums squared deviations from the
// mean in sample order (numpy's two-pass variance) while collecting the
// buckets of the wanted ranks, which are then resolved as orderStats does.
// ranks must be ascending and include 0 and n-1 (min and max).
func summarize(a []float64, ranks []int) (vals []float64, mean, ss float64) {
	const shift = 64 - radixBits
	n := len(a)
	if n <= radixSmall {
		vals = orderStats(a, ranks)
		mean = sum(a) / float64(n)
		for _, v := range a {
			ss += (v - mean) * (v - mean)
		}
		return vals, mean, ss
	}
	counts := make([]int32, radixDigits)
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= n; i += 4 {
		x0, x1, x2, x3 := a[i], a[i+1], a[i+2], a[i+3]
		s0 += x0
		s1 += x1
		s2 += x2
		s3 += x3
		counts[digit(x0, shift)]++
		counts[digit(x1, shift)]++
		counts[digit(x2, shift)]++
		counts[digit(x3, shift)]++
	}
	for ; i < n; i++ {
		s0 += a[i]
		counts[digit(a[i], shift)]++
	}
	mean = ((s0 + s1) + (s2 + s3)) / float64(n)
	sel := newSelection(counts, ranks)
	for _, v := range a {
		ss += (v - mean) * (v - mean)
		sel.keep(v, shift)
	}
	vals = make([]float64, len(ranks))
	sel.resolve(vals, shift)
	return vals, mean, ss
}
