package replay

import (
	"testing"
)

// TestLagHistQuantiles checks the histogram against known values.
func TestLagHistQuantiles(t *testing.T) {
	var h lagHist
	for v := int64(1); v <= 1000; v++ {
		h.Record(v * 1000) // 1..1000 µs
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 500_000}, {0.99, 990_000}, {1, 1_000_000}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.13 {
			t.Errorf("q%.2f = %d, want within 12.5%% above %d", c.q, got, c.want)
		}
	}
}
