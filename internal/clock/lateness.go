package clock

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Lateness is a lock-free histogram of how late things happened against
// their scheduled time on this clock (replay's dispatch lag, the mock's
// event writes), in non-negative nanoseconds. Each power of two is split
// into 8 buckets, so a quantile is reported as an upper bound at most
// 12.5% above the true value, and never above the largest value recorded.
// Record is a few atomic adds: safe and cheap from every goroutine.
type Lateness struct {
	b   [64 * 8]atomic.Int64
	n   atomic.Int64
	sum atomic.Int64
	max atomic.Int64
}

// latenessBucket is the bucket of v >= 0: values below 8 have their own,
// above that bucket e*8+m holds [2^e + m*2^(e-3), 2^e + (m+1)*2^(e-3)).
func latenessBucket(v int64) int {
	if v < 8 {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 // 2^e <= v
	m := (v >> (e - 3)) & 7
	return e*8 + int(m)
}

// latenessUpper is the largest value bucket i holds.
func latenessUpper(i int) int64 {
	if i < 8 {
		return int64(i)
	}
	e, m := i/8, int64(i%8)
	return (int64(1) << e) + (m+1)<<(e-3) - 1
}

// Record adds one value; negative values count as 0 (early is on time).
func (h *Lateness) Record(v int64) {
	v = max(v, 0)
	h.b[latenessBucket(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Quantile returns an upper bound of the q-quantile (the smallest bucket
// holding ceil(q*n) values), 0 when empty.
func (h *Lateness) Quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := min(max(int64(math.Ceil(q*float64(n))), 1), n)
	var seen int64
	for i := range h.b {
		seen += h.b[i].Load()
		if seen >= rank {
			return min(latenessUpper(i), h.max.Load())
		}
	}
	return h.max.Load()
}

// Count, Sum and Max are the number, total and largest of the values.
func (h *Lateness) Count() int64 { return h.n.Load() }
func (h *Lateness) Sum() int64   { return h.sum.Load() }
func (h *Lateness) Max() int64   { return h.max.Load() }
