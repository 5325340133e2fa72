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

// NextDue follows the queue: the earliest deadline of the waiters queued,
// the next one once that one has returned or been canceled, and 0 with
// none. Deadlines far off or already passed, so nothing hangs on when a
// goroutine runs.
func TestPreciseNextDue(t *testing.T) {
	p, err := NewPrecise(0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if at := p.NextDue(); at != 0 {
		t.Fatalf("NextDue with no waiter: %d, want 0", at)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wait := func(ctx context.Context, at int64, n int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.WaitUntil(ctx, at)
		}()
		for p.queued() != n {
			time.Sleep(time.Millisecond)
		}
	}
	far := Mono() + int64(time.Hour)
	first, cancelFirst := context.WithCancel(ctx)
	wait(ctx, far+int64(time.Second), 1)
	wait(first, far, 2)
	if at := p.NextDue(); at != far {
		t.Fatalf("NextDue with waiters at +1h and +1h1s: %d, want the +1h one's %d", at, far)
	}
	soon := Mono() + int64(50*time.Millisecond)
	wait(ctx, soon, 3)
	if at := p.NextDue(); at != soon {
		t.Fatalf("NextDue after a waiter due in 50 ms was added: %d, want its %d", at, soon)
	}
	for p.queued() != 2 || Mono() < soon { // released, then past its deadline
		time.Sleep(time.Millisecond)
	}
	if at := p.NextDue(); at != far {
		t.Fatalf("NextDue once the 50 ms waiter passed: %d, want the +1h one's %d", at, far)
	}
	cancelFirst()
	for p.queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	if at := p.NextDue(); at != far+int64(time.Second) {
		t.Fatalf("NextDue once the +1h waiter was canceled: %d, want the +1h1s one's %d", at, far+int64(time.Second))
	}
	cancel()
	wg.Wait()
	if at := p.NextDue(); at != 0 {
		t.Fatalf("NextDue once every waiter was canceled: %d, want 0", at)
	}
}

// queued is how many waiters the heap holds.
func (p *Precise) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q.Len()
}
