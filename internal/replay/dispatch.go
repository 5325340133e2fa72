package replay

import (
	"context"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// Dispatcher wakes callers at absolute instants of the monotonic clock. It
// has one job: WaitUntil(at) returns as soon after at as it can.
//
// Lag is clock.Mono() on return minus at; it is what the run's health
// reports as dispatch lag.
type Dispatcher interface {
	// WaitUntil blocks until clock.Mono() >= at and returns the lag in
	// nanoseconds, or returns ctx's error if ctx ends first.
	WaitUntil(ctx context.Context, at int64) (lagNs int64, err error)
}

var (
	_ Dispatcher = SleepDispatcher{}
	_ Dispatcher = (*clock.Precise)(nil)
)

// DefaultSpin is the margin a Runner's own clock.Precise dispatcher uses:
// each request is released a little early and spins the rest, the margin
// following the measured wake-up lateness (see clock.Precise).
const DefaultSpin = clock.AdaptiveSpin

// SleepDispatcher waits with Go's timers. Simple and cheap, but on Linux a Go
// timer wakes ~0.5 ms late at p50 and ~1 ms at p99 (the runtime's netpoller
// granularity plus the default 50 us timer slack): the baseline clock.Precise is
// measured against.
type SleepDispatcher struct{}

// WaitUntil implements Dispatcher.
func (SleepDispatcher) WaitUntil(ctx context.Context, at int64) (int64, error) {
	d := at - clock.Mono()
	if d > 0 {
		t := time.NewTimer(time.Duration(d))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
	return clock.Mono() - at, nil
}
