package analyze

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestOrderStatsMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 40 {
		n := 1 + r.IntN(50000)
		a := make([]float64, n)
		for i := range a {
			switch trial % 4 {
			case 0:
				a[i] = r.Float64() * 1e7
			case 1:
				a[i] = float64(r.IntN(5)) // many duplicates
			case 2:
				a[i] = r.NormFloat64() * 1e3 // negatives
			default:
				a[i] = 1e6 + float64(r.IntN(1000)) // one tight cluster
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
	for trial := range 12 {
		n := 1 + r.IntN(40000)
		if trial%3 == 0 {
			n = radixSmall + 1 + r.IntN(4) // around the small-input switch
		}
		a := make([]float64, n)
		for i := range a {
			a[i] = float64(1e7+r.Int64N(1e7)) / float64(1+r.IntN(3))
			if trial%4 == 1 {
				a[i] = -a[i] * float64(r.IntN(2))
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
