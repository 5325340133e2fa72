package replay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/clock"
)

// TestPreciseOrderAndCancel: waiters wake no earlier than their deadline
// and in deadline order even when a later-registered one is due first; a
// canceled wait returns the context's error; Close releases the rest.
func TestPreciseOrderAndCancel(t *testing.T) {
	p, err := NewPrecise(0)
	if err != nil {
		t.Fatal(err)
	}
	base := clock.Mono()
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	// Registered latest-first, so each new one re-arms the timer earlier.
	for _, i := range []int{5, 4, 3, 2, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := base + int64(i)*int64(20*time.Millisecond)
			lag, err := p.WaitUntil(context.Background(), at)
			if err != nil || lag < 0 || clock.Mono() < at {
				t.Errorf("waiter %d: lag %d err %v", i, lag, err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}()
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, err := p.WaitUntil(ctx, base+int64(time.Hour)); err != context.Canceled {
		t.Errorf("canceled wait returned %v", err)
	}
	wg.Wait()
	for k, i := range order {
		if i != k+1 {
			t.Fatalf("woke in order %v, want 1..5", order)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := p.WaitUntil(context.Background(), clock.Mono()+int64(time.Hour)); done <- err }()
	time.Sleep(10 * time.Millisecond)
	p.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release a pending waiter")
	}
	if _, err := p.WaitUntil(context.Background(), clock.Mono()+int64(time.Second)); err == nil {
		t.Error("WaitUntil after Close succeeded")
	}
}

// TestLagHistQuantiles checks the histogram against known values.
func TestLagHistQuantiles(t *testing.T) {
	var h lagHist
	for v := int64(1); v <= 1000; v++ {
		h.Record(v * 1000) // 1..1000 µs
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 500_000}, {0.99, 990_000}, {1, 1_000_000}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.13 {
			t.Errorf("q%.2f = %d, want within 12.5%% above %d", c.q, got, c.want)
		}
	}
}
