package clock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waker is what replay and the mock use of Precise.
type waker interface {
	WaitUntil(ctx context.Context, at int64) (int64, error)
	Close() error
}

// TestPreciseOrderAndCancel: waiters wake no earlier than their deadline,
// even when a later-registered one is due first; a canceled wait returns
// the context's error; Close releases the rest. It runs on this platform's
// Precise and on the portable timer one, with and without a spin. The
// order in which woken goroutines then run is the Go scheduler's (on a
// loaded machine it is not the deadlines'), so the timerfd's re-arming for
// an earlier waiter is checked on its state instead
// (TestPreciseRearmsForEarlierWaiter).
func TestPreciseOrderAndCancel(t *testing.T) {
	for _, spin := range []time.Duration{0, AdaptiveSpin} {
		p, err := NewPrecise(spin)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("platform/spin=%v", spin), func(t *testing.T) { testWaker(t, p) })
		t.Run(fmt.Sprintf("timer/spin=%v", spin), func(t *testing.T) { testWaker(t, newTimerPrecise(spin)) })
	}
}

func testWaker(t *testing.T, p waker) {
	base := Mono()
	var wg sync.WaitGroup
	// Registered latest-first, so each new one re-arms the timer earlier.
	for _, i := range []int{5, 4, 3, 2, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := base + int64(i)*int64(20*time.Millisecond)
			lag, err := p.WaitUntil(context.Background(), at)
			if err != nil || lag < 0 || Mono() < at {
				t.Errorf("waiter %d: lag %d err %v", i, lag, err)
			}
		}()
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, err := p.WaitUntil(ctx, base+int64(time.Hour)); err != context.Canceled {
		t.Errorf("canceled wait returned %v", err)
	}
	wg.Wait()
	done := make(chan error, 1)
	go func() { _, err := p.WaitUntil(context.Background(), Mono()+int64(time.Hour)); done <- err }()
	time.Sleep(10 * time.Millisecond)
	p.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release a pending waiter")
	}
	if _, err := p.WaitUntil(context.Background(), Mono()+int64(time.Second)); err == nil {
		t.Error("WaitUntil after Close succeeded")
	}
}

// With AdaptiveSpin the margin becomes the spinQuantile of the recent
// lateness once a window of samples came, capped at maxSpin; a fixed
// margin never moves.
func TestSpinMarginAdapts(t *testing.T) {
	var s spinMargin
	s.init(AdaptiveSpin)
	for i := range spinWindow {
		s.record(int64(i) * 100) // 0, 100, ..., 25500 ns
		s.maybeAdapt()
	}
	if want := int64(spinWindow*spinQuantile) * 100; s.margin.Load() != want {
		t.Fatalf("margin %d after a window of samples, want %d", s.margin.Load(), want)
	}
	for range spinWindow {
		s.record(int64(time.Second))
		s.maybeAdapt()
	}
	if s.margin.Load() != maxSpin {
		t.Fatalf("margin %d after second-late wakes, want the cap %d", s.margin.Load(), maxSpin)
	}
	var f spinMargin
	f.init(20 * time.Microsecond)
	for range 2 * spinWindow {
		f.record(int64(time.Millisecond))
		f.maybeAdapt()
	}
	if f.margin.Load() != int64(20*time.Microsecond) {
		t.Fatalf("fixed margin moved to %d", f.margin.Load())
	}
}
