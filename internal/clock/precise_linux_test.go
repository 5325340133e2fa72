//go:build linux

package clock

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A waiter registered after others but due before them re-arms the timerfd
// for its own release, and the heap releases in deadline order: checked on
// the Precise's state once every waiter is queued, not on when the woken
// goroutines happen to run.
func TestPreciseRearmsForEarlierWaiter(t *testing.T) {
	p, err := NewPrecise(0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	base := Mono() + int64(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	queued := func() (int, int64, int64) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.q.Len() == 0 {
			return 0, p.armed, 0
		}
		return p.q.Len(), p.armed, p.q[0].at
	}
	for n, i := range []int{5, 4, 3, 2, 1} { // latest first
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.WaitUntil(ctx, base+int64(i)*int64(time.Second))
		}()
		for {
			k, armed, head := queued()
			if k == n+1 {
				if want := base + int64(i)*int64(time.Second); head != want || armed != want {
					t.Fatalf("after queuing the waiter due at +%ds: armed %d, head %d, want both %d", i, armed-base, head-base, want-base)
				}
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	if k, _, _ := queued(); k != 0 {
		t.Fatalf("%d canceled waiters left in the queue", k)
	}
}
