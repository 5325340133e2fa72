package clock

import "testing"

// Quantiles are upper bounds within 12.5% of the true value, never above
// the maximum; early values count as on time.
func TestLatenessQuantiles(t *testing.T) {
	var h Lateness
	if h.Quantile(0.5) != 0 {
		t.Fatal("empty histogram has a quantile")
	}
	var sum int64
	for v := int64(1); v <= 1000; v++ {
		h.Record(v * 1000) // 1..1000 µs
		sum += v * 1000
	}
	h.Record(-5)
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 500_000}, {0.99, 990_000}, {1, 1_000_000}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.125 {
			t.Errorf("q%.2f = %d, want within 12.5%% above %d", c.q, got, c.want)
		}
	}
	if h.Quantile(0) != 0 || h.Count() != 1001 || h.Sum() != sum || h.Max() != 1_000_000 {
		t.Errorf("q0 %d count %d sum %d (want %d) max %d", h.Quantile(0), h.Count(), h.Sum(), sum, h.Max())
	}
	// Every bucket's upper bound is at most 12.5% above its lower bound.
	for v := int64(8); v < 1<<40; v = v*9/8 + 1 {
		if up := latenessUpper(latenessBucket(v)); up < v || float64(up) > float64(v)*1.125 {
			t.Fatalf("value %d lands in a bucket reaching %d", v, up)
		}
	}
}
