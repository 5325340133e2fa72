package analyze

import (
	"math"
	"slices"
)

// orderStats returns the values of a at the given ranks (0-based positions
// in ascending order, each in [0, len(a))) without sorting or modifying a.
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

const radixSmall = 2048 // below this, sort a copy

func orderStatsAt(a []float64, ranks []int, out []float64, shift uint) {
	if len(a) <= radixSmall {
		s := slices.Clone(a)
		slices.Sort(s)
		for i, r := range ranks {
			out[i] = s[r]
		}
		return
	}
	counts := make([]int, 1<<16)
	for _, v := range a {
		counts[(sortableKey(v)>>shift)&0xFFFF]++
	}
	// start[b] = number of elements in buckets below b.
	start := make([]int, 1<<16)
	total := 0
	for b, c := range counts {
		start[b] = total
		total += c
	}
	// Group the ranks by bucket; sub-slices collect the buckets' elements.
	type group struct {
		bucket int
		ranks  []int
		idx    []int // positions in out
		elems  []float64
	}
	var groups []*group
	slot := make([]uint8, 1<<16) // bucket -> 1 + index in groups; 0: not wanted
	for i, r := range ranks {
		b := sortBucket(start, counts, r)
		if slot[b] == 0 {
			groups = append(groups, &group{bucket: b, elems: make([]float64, 0, counts[b])})
			slot[b] = uint8(len(groups)) // ranks are few (2 per percentile), far below 255
		}
		g := groups[slot[b]-1]
		g.ranks = append(g.ranks, r-start[b])
		g.idx = append(g.idx, i)
	}
	for _, v := range a {
		if k := slot[(sortableKey(v)>>shift)&0xFFFF]; k != 0 {
			g := groups[k-1]
			g.elems = append(g.elems, v)
		}
	}
	for _, g := range groups {
		sub := make([]float64, len(g.ranks))
		if shift == 0 { // every element of the bucket has the same bits
			for i := range sub {
				sub[i] = g.elems[0]
			}
		} else {
			orderStatsAt(g.elems, g.ranks, sub, shift-16)
		}
		for i, k := range g.idx {
			out[k] = sub[i]
		}
	}
}

// sortBucket finds the bucket holding rank r.
func sortBucket(start, counts []int, r int) int {
	b, _ := slices.BinarySearch(start, r+1) // first bucket starting after r
	b--
	for counts[b] == 0 { // empty buckets share a start; step back to the filled one
		b--
	}
	return b
}
