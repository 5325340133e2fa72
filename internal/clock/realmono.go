package clock

import (
	"sync"
	"sync/atomic"
	"time"
)

// RealToMono converts CLOCK_REALTIME nanoseconds (the clock of the
// kernel's socket receive stamps) to Mono nanoseconds:
//
//	mono = real - off,  off = Wall - Mono (WallMinusMono)
//
// off is the narrowest of several bracketing reads, so its error is the
// bracket's width (Width). The two clocks run at the same rate (NTP slews
// both), so off changes only when the wall clock is stepped; Mono
// therefore re-measures it when a conversion finds the last measure older
// than the interval given to NewRealToMono, on the caller's goroutine (one
// caller at a time, the others convert with the offset they find) and
// keeps the largest change seen (Drift). It is safe for concurrent use and
// allocates nothing.
type RealToMono struct {
	every int64
	mu    sync.Mutex // held by the one re-measuring

	off, width, at atomic.Int64
	remeasures     atomic.Int64
	drift          atomic.Int64
}

// NewRealToMono measures the offset and returns a converter that
// re-measures it every interval.
func NewRealToMono(every time.Duration) *RealToMono {
	c := &RealToMono{every: int64(every)}
	c.measure(false)
	return c
}

func (c *RealToMono) measure(again bool) {
	off, width := WallMinusMono()
	if again {
		d := off - c.off.Load()
		if d < 0 {
			d = -d
		}
		if d > c.drift.Load() {
			c.drift.Store(d)
		}
		c.remeasures.Add(1)
	}
	c.off.Store(off)
	c.width.Store(width)
	c.at.Store(Mono())
}

// Mono converts a CLOCK_REALTIME reading to the Mono clock.
func (c *RealToMono) Mono(realNs int64) int64 {
	if Mono()-c.at.Load() > c.every && c.mu.TryLock() {
		c.measure(true)
		c.mu.Unlock()
	}
	return realNs - c.off.Load()
}

// Offset is the current Wall - Mono offset and its measure's width (an
// error bound), ns.
func (c *RealToMono) Offset() (off, width int64) { return c.off.Load(), c.width.Load() }

// Remeasures is how many times the offset was measured again, Drift the
// largest change one of them found, ns.
func (c *RealToMono) Remeasures() int64 { return c.remeasures.Load() }
func (c *RealToMono) Drift() int64      { return c.drift.Load() }

// Every is the re-measure interval.
func (c *RealToMono) Every() time.Duration { return time.Duration(c.every) }
