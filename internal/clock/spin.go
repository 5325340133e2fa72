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
	spinWindow    = 256                           // lateness samples the margin is computed from
	spinFirst     = 16                            // samples before the first adaptation
	spinQuantile  = 0.875                         // of the lateness, covered by the margin when the budget is tight
	spinQuantileT = 0.99                          // covered instead when the budget allows
	maxSpin       = int64(100 * time.Microsecond) // the margin's cap at any wake rate
	maxSpinIdle   = int64(2 * time.Millisecond)   // the cap's ceiling at low wake rates
	spinBudget    = 0.05                          // cores the spin may take at the cap: wake rate x margin
)

// spinMargin is how long before its deadline a waiter of Precise is
// released to busy-wait the rest (yielding its P between clock reads):
//
//	release = at - margin,  lag = max(0, wake - release - margin)
//
// Fixed, or with AdaptiveSpin following the recent wake-up lateness
// (wake - release). Each adaptation looks at the last spinWindow samples
// (from the spinFirst-th on: a slow run must not wait minutes for a full
// window) and their wake rate R (wakes per second over the samples' span),
// and sets
//
//	ceil   = clamp(spinBudget / R, maxSpin, maxSpinIdle)
//	margin = min(ceil, Q(spinQuantileT))  if R * Q(spinQuantileT) <= spinBudget
//	         min(ceil, Q(spinQuantile))   otherwise
//
// where Q(q) is the lateness quantile. A spin costs about margin - lateness
// per wake, so the CPU it takes is at most R * margin: at high rates the
// margin stays within maxSpin and covers most wakes, and at low rates, where
// the same CPU buys a much longer spin, it covers the lateness tail too (a
// machine that sleeps between rare wakes wakes late: BENCHMARKS.md,
// "Dispatch lag", has the 20 req/s figures). Adaptations happen every
// spinWindow/4 samples, or after 4 samples when a second has passed since
// the last one.
type spinMargin struct {
	fixed    int64        // margin in ns when not adaptive
	adaptive bool         // margin from the measured lateness
	margin   atomic.Int64 // ns each waiter is released before its deadline

	// Lateness samples (wake - release, ns) of released waiters and their
	// wake times (Mono): rings the waiters write and one adapting goroutine
	// reads. A sample's two halves may come from different wakes when
	// waiters race; the rate and quantiles only need most of them right.
	lateN     atomic.Uint64
	late      [spinWindow]atomic.Int64
	wakeAt    [spinWindow]atomic.Int64
	scratch   [spinWindow]int64 // the adapter's sorting space
	adapted   uint64            // lateN at the last adaptation; the adapter's
	adaptedAt int64             // Mono at the last adaptation; the adapter's
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

// record notes one waiter's wake-up lateness, woken at Mono now; safe from
// every waiter.
func (s *spinMargin) record(lateness, now int64) {
	if s.adaptive {
		i := s.lateN.Add(1) % spinWindow
		s.late[i].Store(lateness)
		s.wakeAt[i].Store(now)
	}
}

// maybeAdapt recomputes the margin when enough new samples came (see
// spinMargin); one goroutine at a time may call it, now being Mono.
func (s *spinMargin) maybeAdapt(now int64) {
	n := s.lateN.Load()
	fresh := n - s.adapted
	if !s.adaptive || n < spinFirst || (fresh < spinWindow/4 && (fresh < 4 || now-s.adaptedAt < int64(time.Second))) {
		return
	}
	s.adapted, s.adaptedAt = n, now
	k := int(min(n, spinWindow))
	first, last := int64(0), int64(0)
	for j := range k {
		i := (n - uint64(j)) % spinWindow // newest first
		s.scratch[j] = s.late[i].Load()
		t := s.wakeAt[i].Load()
		if j == 0 {
			last = t
		}
		first = t
	}
	rate := float64(k-1) * float64(time.Second) / float64(max(last-first, 1))
	sample := s.scratch[:k]
	slices.Sort(sample)
	q := func(p float64) int64 { return sample[int(p*float64(k-1))] }
	ceil := min(max(int64(spinBudget/rate*float64(time.Second)), maxSpin), maxSpinIdle)
	m := q(spinQuantile)
	if t := q(spinQuantileT); rate*float64(t)/float64(time.Second) <= spinBudget {
		m = t
	}
	s.margin.Store(max(0, min(m, ceil)))
}

// spinUntil busy-waits from Mono reading now until at and returns Mono at
// the end; the P stays free for the dispatcher and other waiters.
func spinUntil(now, at int64) int64 {
	for ; now < at; now = Mono() {
		runtime.Gosched()
	}
	return now
}
