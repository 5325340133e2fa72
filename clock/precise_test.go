package clock

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestPreciseOrderAndCancel: waiters wake no earlier than their deadline
// and in deadline order even when a later-registered one is due first; a
// canceled wait returns the context's error; Close releases the rest.
func TestPreciseOrderAndCancel(t *testing.T) {
	p, err := NewPrecise(0)
	if err != nil {
		t.Fatal(err)
	}
	base := Mono()
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
			if err != nil || lag < 0 || Mono() < at {
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
