package analyze

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestOrderStatsMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 64 {
		n := 1 + r.IntN(50000)
		a := make([]float64, n)
		for i := range a {
			switch trial % 8 {
			case 0:
				a[i] = r.Float64() * 1e7
			case 1:
				a[i] = float64(r.IntN(5)) // many duplicates
			case 2:
				a[i] = r.NormFloat64() * 1e3 // negatives
			case 3:
				a[i] = 1e6 + float64(r.IntN(1000)) // one tight cluster
			case 4:
				a[i] = 7.5e6 // one value
			case 5: // a heavy tail: most near 10 ms, a few seconds, zeros
				a[i] = 1e7 + float64(r.IntN(1e6))
				if r.IntN(1000) == 0 {
					a[i] = float64(r.Int64N(1e10))
				}
				if r.IntN(100) == 0 {
					a[i] = 0
				}
			case 6: // the whole key range: infinities, extremes, signed zeros
				a[i] = []float64{math.Inf(-1), math.Inf(1), -math.MaxFloat64, math.MaxFloat64,
					math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 0, 1, -1}[r.IntN(9)] * float64(1+r.IntN(2))
			default: // two tight clusters far apart: the ranks fall in a bucket that must be split again
				a[i] = float64(r.IntN(2))*1e9 + float64(r.IntN(3))
			}
		}
		sorted := slices.Clone(a)
		slices.Sort(sorted)
		ranks := []int{0, n / 2, n - 1, r.IntN(n), (n - 1) * 99 / 100}
		slices.Sort(ranks)
		ranks = slices.Compact(ranks)
		before := slices.Clone(a)
		got := orderStats(a, ranks)
		for i, rk := range ranks {
			if got[i] != sorted[rk] {
				t.Fatalf("trial %d n %d rank %d: got %v want %v", trial, n, rk, got[i], sorted[rk])
			}
		}
		if !slices.Equal(a, before) {
			t.Fatal("orderStats modified its input")
		}
	}
}

// TestSummarizeMatchesTwoPass: the fused passes give the plain two-pass
// mean and variance to the bit, and the sorted order statistics.
func TestSummarizeMatchesTwoPass(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for trial := range 24 {
		n := 1 + r.IntN(40000)
		if trial%3 == 0 {
			n = radixSmall + 1 + r.IntN(4) // around the small-input switch
		}
		a := make([]float64, n)
		for i := range a {
			a[i] = float64(1e7+r.Int64N(1e7)) / float64(1+r.IntN(3))
			switch trial % 4 {
			case 1:
				a[i] = -a[i] * float64(r.IntN(2))
			case 2:
				a[i] = 3e7 // one value
			case 3: // a heavy tail and zeros
				if r.IntN(500) == 0 {
					a[i] *= 1e3
				}
				if r.IntN(50) == 0 {
					a[i] = 0
				}
			}
		}
		ranks := []int{0, n / 3, n / 3, n - 1}
		ranks = slices.Compact(ranks)
		vals, mean, ss := summarize(a, ranks)
		wantMean := sum(a) / float64(n)
		var wantSS float64
		for _, v := range a {
			wantSS += (v - wantMean) * (v - wantMean)
		}
		if mean != wantMean || ss != wantSS {
			t.Fatalf("trial %d n %d: mean %v ss %v, want %v %v", trial, n, mean, ss, wantMean, wantSS)
		}
		sorted := slices.Sorted(slices.Values(a))
		for i, rk := range ranks {
			if vals[i] != sorted[rk] {
				t.Fatalf("trial %d n %d rank %d: got %v want %v", trial, n, rk, vals[i], sorted[rk])
			}
		}
	}
}

// TestSummarizeSpansMatchesCopy: statistics over spans of a slice equal
// the plain ones of the spans copied out one after another (sum's mean,
// the two-pass variance, a sorted copy), to the bit, however the spans cut
// the groups of four that the sum adds in lanes.
func TestSummarizeSpansMatchesCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 60 {
		a := make([]float64, 1+r.IntN(30000))
		for i := range a {
			a[i] = float64(1e7+r.Int64N(1e7)) / float64(1+r.IntN(3))
			if trial%2 == 1 { // magnitudes far apart: every change of lane shows in the rounding
				a[i] = r.Float64() * math.Pow(10, float64(r.IntN(16)))
			}
			if trial%5 == 1 && r.IntN(20) == 0 {
				a[i] = 0
			}
		}
		var spans []span
		var all []float64
		for from := 0; from < len(a); {
			to := min(len(a), from+r.IntN([]int{4, 9, 300}[trial%3]))
			if r.IntN(4) > 0 { // some parts left out
				spans = append(spans, span{from, to})
				all = append(all, a[from:to]...)
			}
			from = to + r.IntN(3)
		}
		if len(all) == 0 {
			continue
		}
		n := len(all)
		ranks := slices.Compact([]int{0, n / 4, n / 2, n * 99 / 100, n - 1})
		// Without bounds, and with bounds as found or looser (the view of a
		// subset of the bounded samples).
		bounds := keyBounds{}
		if trial%3 > 0 {
			lo, hi := keyRange(a)
			if trial%3 == 2 {
				lo, hi = lo-min(lo, uint64(r.Int64N(1<<40))), hi+min(math.MaxUint64-hi, uint64(r.Int64N(1<<40)))
			}
			bounds = keyBounds{lo, hi, true}
		}
		vals, mean, ss := summarizeSpans(a, spans, ranks, bounds)
		sorted := slices.Sorted(slices.Values(all))
		var wantVals []float64
		for _, rk := range ranks {
			wantVals = append(wantVals, sorted[rk])
		}
		wantMean, wantSS := sum(all)/float64(n), 0.0
		for _, v := range all {
			wantSS += (v - wantMean) * (v - wantMean)
		}
		if mean != wantMean || ss != wantSS || !slices.Equal(vals, wantVals) {
			t.Fatalf("trial %d (%d samples in %d spans): %v %v %v, want %v %v %v", trial, n, len(spans), vals, mean, ss, wantVals, wantMean, wantSS)
		}
	}
}
