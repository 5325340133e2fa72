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

// wakes feeds a spinMargin samples as Precise's waiters would, on a clock
// of its own.
type wakes struct {
	spinMargin
	now int64
}

// feed records n wakes gap apart, the i-th late(i) ns late, adapting after
// each as the dispatcher does.
func (w *wakes) feed(n int, gap time.Duration, late func(i int) int64) {
	for i := range n {
		w.now += int64(gap)
		w.record(late(i), w.now)
		w.maybeAdapt(w.now)
	}
}

// With AdaptiveSpin the margin follows the recent lateness: at a high wake
// rate the spinQuantile of it, capped at maxSpin; at a low rate, where the
// CPU budget allows, its spinQuantileT, up to maxSpinIdle; and it adapts
// after spinFirst samples when a second has passed, not only after a full
// window. A fixed margin never moves.
func TestSpinMarginAdapts(t *testing.T) {
	t.Run("high rate", func(t *testing.T) {
		var w wakes
		w.init(AdaptiveSpin)
		// 5,000 wakes/s, lateness 0, 100, ..., 25500 ns: spinning to the
		// p99 (25.3 us) would take 0.13 core, over the budget, so the
		// margin is the 0.875 quantile.
		w.feed(spinWindow, 200*time.Microsecond, func(i int) int64 { return int64(i) * 100 })
		if want := quantileIndex(spinQuantile) * 100; w.margin.Load() != want {
			t.Fatalf("margin %d after a window of samples, want %d", w.margin.Load(), want)
		}
		w.feed(spinWindow, 200*time.Microsecond, func(int) int64 { return int64(time.Second) })
		if w.margin.Load() != maxSpin {
			t.Fatalf("margin %d after second-late wakes, want the cap %d", w.margin.Load(), maxSpin)
		}
	})
	t.Run("low rate", func(t *testing.T) {
		var w wakes
		w.init(AdaptiveSpin)
		w.now = int64(time.Hour)
		// 20 wakes/s, each 1 ms late: adapted at the spinFirst-th sample.
		w.feed(spinFirst-1, 50*time.Millisecond, func(int) int64 { return int64(time.Millisecond) })
		if w.margin.Load() != int64(50*time.Microsecond) {
			t.Fatalf("margin %d before %d samples, want the first guess", w.margin.Load(), spinFirst)
		}
		w.feed(1, 50*time.Millisecond, func(int) int64 { return int64(time.Millisecond) })
		if w.margin.Load() != int64(time.Millisecond) {
			t.Fatalf("margin %d after %d samples 1 ms late at 20/s, want 1 ms", w.margin.Load(), spinFirst)
		}
		// Lateness 0 to 1.53 ms: its p99 (1.512 ms) costs 0.03 core at
		// 20/s, within the budget, so the margin covers it. (Any window of
		// spinWindow consecutive samples holds each value once: adaptations
		// come every second here.)
		w.feed(2*spinWindow, 50*time.Millisecond, func(i int) int64 { return int64(i%spinWindow) * 6000 })
		if want := quantileIndex(spinQuantileT) * 6000; w.margin.Load() != want {
			t.Fatalf("margin %d at 20 wakes/s, want the lateness p99 %d", w.margin.Load(), want)
		}
		// Seconds late: the ceiling.
		w.feed(spinWindow, 50*time.Millisecond, func(int) int64 { return int64(3 * time.Second) })
		if w.margin.Load() != maxSpinIdle {
			t.Fatalf("margin %d after second-late wakes at 20/s, want the ceiling %d", w.margin.Load(), maxSpinIdle)
		}
	})
	t.Run("fixed", func(t *testing.T) {
		var w wakes
		w.init(20 * time.Microsecond)
		w.feed(2*spinWindow, time.Millisecond, func(int) int64 { return int64(time.Millisecond) })
		if w.margin.Load() != int64(20*time.Microsecond) {
			t.Fatalf("fixed margin moved to %d", w.margin.Load())
		}
	})
}

// quantileIndex is the index of quantile p in a sorted full window.
func quantileIndex(p float64) int64 { return int64(p * float64(spinWindow-1)) }
