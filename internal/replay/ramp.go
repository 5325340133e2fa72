package replay

import (
	"context"
	"time"
)

// rampConcurrency starts the concurrency ramp (Config.ConcurrencyRampDuration)
// and returns the function that stops it and waits for it. The slots a
// ramp has not opened yet are held by placeholders in the slot channel,
// which its goroutine takes out one at a time on the ramp's schedule: the
// dispatch path is unchanged, it only finds fewer free slots. The
// goroutine ends when the ramp is complete, ctx ends or stop is called.
func (r *runState) rampConcurrency(ctx context.Context) (stop func()) {
	d, n := r.cfg.ConcurrencyRampDuration, r.cfg.MaxConcurrency
	if d <= 0 || r.slots == nil || n < 2 {
		return func() {}
	}
	for range n - 1 {
		r.slots <- struct{}{} // a closed slot; the channel is empty before the run
	}
	ctx, cancel := context.WithCancel(ctx)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(0)
		defer t.Stop()
		for k := 1; k < n; k++ {
			t.Reset(time.Until(start.Add(d * time.Duration(k) / time.Duration(n-1))))
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			<-r.slots // opens slot k+1: the channel holds at least the placeholders left
		}
	}()
	return func() { cancel(); <-done }
}
