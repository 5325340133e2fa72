package clock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// timerPrecise wakes goroutines at absolute instants of Mono on Go timers:
// it is Precise where there is no timerfd (macOS, the BSDs), and is built
// everywhere so that Linux CI tests it too. Each waiter sleeps on
// a Go timer until its release, margin before the deadline, and busy-waits
// the rest (spinMargin, spin.go). Go's timers can be a good part of a
// millisecond late, so without a spin the lag is larger than Linux's
// timerfd gives; with AdaptiveSpin the margin follows the measured
// lateness up to maxSpin, and lateness beyond that shows as lag.
//
// Timers are pooled: a wait in steady state allocates nothing.
type timerPrecise struct {
	spin     spinMargin
	adaptMu  sync.Mutex // the goroutine adapting the margin
	closed   atomic.Bool
	done     chan struct{} // closed by Close: releases every waiter
	closeOne sync.Once
	timers   sync.Pool
}

// newTimerPrecise returns a timerPrecise; spin is NewPrecise's.
func newTimerPrecise(spin time.Duration) *timerPrecise {
	p := &timerPrecise{done: make(chan struct{})}
	p.spin.init(spin)
	p.timers.New = func() any {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return t
	}
	return p
}

// Margin is how long before its deadline a waiter is now released.
func (p *timerPrecise) Margin() time.Duration { return time.Duration(p.spin.margin.Load()) }

// Close releases every waiter still waiting (their WaitUntil returns early,
// with a negative lag). It is safe to call twice.
func (p *timerPrecise) Close() error {
	p.closeOne.Do(func() {
		p.closed.Store(true)
		close(p.done)
	})
	return nil
}

// WaitUntil blocks until Mono() >= at and returns the lag (Mono() on
// return minus at) in nanoseconds, or ctx's error if ctx ends first.
func (p *timerPrecise) WaitUntil(ctx context.Context, at int64) (int64, error) {
	now := Mono()
	if at-now <= 0 {
		return now - at, nil
	}
	if p.closed.Load() {
		return 0, fmt.Errorf("waiting for %v: clock.Precise closed", time.Duration(at-now))
	}
	rel := at - p.spin.margin.Load()
	if d := rel - now; d > 0 {
		t := p.timers.Get().(*time.Timer)
		t.Reset(time.Duration(d))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			p.timers.Put(t)
			return 0, ctx.Err()
		case <-p.done:
			t.Stop()
			p.timers.Put(t)
			return Mono() - at, nil
		}
		p.timers.Put(t) // fired: Reset on next use is safe (Go 1.23 timers)
		now = Mono()
		p.spin.record(now-rel, now)
		if p.adaptMu.TryLock() {
			p.spin.maybeAdapt(now)
			p.adaptMu.Unlock()
		}
	}
	return spinUntil(now, at) - at, nil
}
