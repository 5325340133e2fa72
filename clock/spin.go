package clock

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// AdaptiveSpin, given to NewPrecise, makes the busy-wait margin follow the
// measured wake-up lateness. replay uses it; the mock uses no spin (its
// events may be a little late, and it must not burn the client's CPU).
const AdaptiveSpin time.Duration = -1

const (
	spinWindow   = 256                           // lateness samples the margin is computed from
	spinQuantile = 0.875                         // of the lateness, covered by the margin
	maxSpin      = int64(100 * time.Microsecond) // caps the busy-wait (and its CPU) per wake
)

// spinMargin is how long before its deadline a waiter of Precise is
// released to busy-wait the rest (yielding its P between clock reads):
//
//	release = at - margin,  lag = max(0, wake - release - margin)
//
// Fixed, or with AdaptiveSpin following the recent wake-up lateness: every
// spinWindow/4 wakes the margin is set to the spinQuantile of the last
// spinWindow lateness samples (wake - release), capped at maxSpin. The
// busy-wait then costs margin - lateness per wake, about the lateness's
// upper spread.
type spinMargin struct {
	fixed    int64        // margin in ns when not adaptive
	adaptive bool         // margin from the measured lateness
	margin   atomic.Int64 // ns each waiter is released before its deadline

	// Lateness samples (wake - release, ns) of released waiters: a ring
	// the waiters write and one adapting goroutine reads.
	lateN   atomic.Uint64
	late    [spinWindow]atomic.Int64
	scratch [spinWindow]int64 // the adapter's sorting space
	adapted uint64            // lateN at the last adaptation; the adapter's
}

// init sets the margin from NewPrecise's spin argument: 0 never spins,
// AdaptiveSpin adapts, anything else is a fixed margin.
func (s *spinMargin) init(spin time.Duration) {
	switch {
	case spin == AdaptiveSpin:
		s.adaptive = true
		s.margin.Store(int64(50 * time.Microsecond)) // a first guess until samples come
	case spin > 0:
		s.fixed = int64(spin)
		s.margin.Store(s.fixed)
	}
}

// record notes one waiter's wake-up lateness; safe from every waiter.
func (s *spinMargin) record(lateness int64) {
	if s.adaptive {
		s.late[s.lateN.Add(1)%spinWindow].Store(lateness)
	}
}

// maybeAdapt recomputes the margin once enough new samples came; one
// goroutine at a time may call it.
func (s *spinMargin) maybeAdapt() {
	n := s.lateN.Load()
	if !s.adaptive || n-s.adapted < spinWindow/4 || n < spinWindow {
		return
	}
	s.adapted = n
	for i := range s.late {
		s.scratch[i] = s.late[i].Load()
	}
	slices.Sort(s.scratch[:])
	m := s.scratch[spinWindow*spinQuantile]
	s.margin.Store(max(0, min(m, maxSpin)))
}

// spinUntil busy-waits from Mono reading now until at and returns Mono at
// the end; the P stays free for the dispatcher and other waiters.
func spinUntil(now, at int64) int64 {
	for ; now < at; now = Mono() {
		runtime.Gosched()
	}
	return now
}
