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
