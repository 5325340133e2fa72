package replay

import (
	"container/heap"
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/clock"
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
	_ Dispatcher = (*Precise)(nil)
)

// SleepDispatcher waits with Go's timers. Simple and cheap, but on Linux a Go
// timer wakes ~0.5 ms late at p50 and ~1 ms at p99 (the runtime's netpoller
// granularity plus the default 50 us timer slack): the baseline Precise is
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

// Precise is a dispatcher built on a dedicated OS thread: one goroutine,
// locked to its thread with timer slack set to 1 ns, blocks in read(2) on a
// CLOCK_MONOTONIC timerfd armed with an absolute deadline (TFD_TIMER_ABSTIME),
// so the kernel wakes it at the earliest pending deadline with hrtimer
// precision. It then releases every waiter that is due. A caller adding a
// deadline earlier than the armed one re-arms the timerfd itself, so the
// thread never sleeps past it. Optionally the thread wakes Spin early and
// busy-waits the rest, trading CPU for the kernel's wake-up jitter.
//
// Waiters are pooled: a wait in steady state allocates nothing.
type Precise struct {
	spin int64 // ns to busy-wait before a deadline
	tfd  int

	mu     sync.Mutex
	q      waitHeap
	armed  int64 // deadline the timerfd is armed for, 0 if disarmed
	closed bool

	done chan struct{}
	pool sync.Pool
}

// waiter is one pending WaitUntil.
type waiter struct {
	at    int64
	index int           // in the heap, -1 when not queued
	ch    chan struct{} // buffered(1): the thread never blocks on a send
}

// NewPrecise starts the dispatcher thread. spin is how long before each
// deadline the thread stops sleeping and busy-waits (0: never spin). Close
// stops it.
func NewPrecise(spin time.Duration) (*Precise, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("creating the dispatcher's timerfd: %w", err)
	}
	p := &Precise{spin: int64(spin), tfd: fd, done: make(chan struct{})}
	p.pool.New = func() any { return &waiter{index: -1, ch: make(chan struct{}, 1)} }
	started := make(chan struct{})
	go p.loop(started)
	<-started
	return p, nil
}

// Close stops the thread and releases every waiter still queued (their
// WaitUntil returns early, with a negative lag). It is safe to call twice.
func (p *Precise) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return nil
	}
	p.closed = true
	p.arm(1) // fire now: wakes the thread's read
	p.mu.Unlock()
	<-p.done
	return unix.Close(p.tfd)
}

// WaitUntil implements Dispatcher.
func (p *Precise) WaitUntil(ctx context.Context, at int64) (int64, error) {
	if at-clock.Mono() <= 0 {
		return clock.Mono() - at, nil
	}
	w := p.pool.Get().(*waiter)
	w.at = at
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.pool.Put(w)
		return 0, fmt.Errorf("waiting for the schedule: dispatcher closed")
	}
	heap.Push(&p.q, w)
	if w.index == 0 && (p.armed == 0 || at-p.spin < p.armed) {
		p.arm(at - p.spin)
	}
	p.mu.Unlock()

	select {
	case <-w.ch:
		lag := clock.Mono() - at
		p.pool.Put(w)
		return lag, nil
	case <-ctx.Done():
		p.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&p.q, w.index)
			p.mu.Unlock()
			p.pool.Put(w)
		} else {
			// Already released: drain the token so the waiter can be reused.
			p.mu.Unlock()
			<-w.ch
			p.pool.Put(w)
		}
		return 0, ctx.Err()
	}
}

// arm sets the timerfd to fire at the absolute monotonic time at (ns).
// p.mu must be held.
func (p *Precise) arm(at int64) {
	if at <= 0 {
		at = 1
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(at)}
	// Cannot fail with a valid fd and spec; a failure would only delay.
	_ = unix.TimerfdSettime(p.tfd, unix.TFD_TIMER_ABSTIME, &spec, nil)
	p.armed = at
}

// loop is the dispatcher thread.
func (p *Precise) loop(started chan<- struct{}) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(p.done)
	// 1 ns slack: the kernel may otherwise coalesce our wake-up up to 50 us
	// later with other timers. Best effort (it cannot fail on Linux).
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	close(started)

	var buf [8]byte
	for {
		next, released, closed := p.release()
		if closed {
			return
		}
		if released {
			// The woken waiters sit in this P's run queue; the read below
			// would hold the P in a syscall until sysmon retakes it (20 us
			// to 10 ms). Yielding hands the P over now.
			runtime.Gosched()
		}
		if next != 0 && p.spin > 0 && next-clock.Mono() <= p.spin {
			for clock.Mono() < next {
				// Busy-wait the last few microseconds.
			}
			continue
		}
		// Blocks until the armed deadline (or a re-arm to an earlier one).
		if _, err := unix.Read(p.tfd, buf[:]); err != nil && err != unix.EINTR && err != unix.EAGAIN {
			return // the fd is broken: waiters fall back to their contexts
		}
	}
}

// release hands every due waiter its token and re-arms the timer for the
// next one. It returns the next deadline (0 if none) and whether the
// dispatcher is closed; when closed it releases every waiter. released
// says whether it woke anyone.
func (p *Precise) release() (next int64, released, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := clock.Mono()
	for len(p.q) > 0 && (p.closed || p.q[0].at <= now) {
		w := heap.Pop(&p.q).(*waiter)
		w.ch <- struct{}{}
		released = true
	}
	if p.closed {
		return 0, released, true
	}
	if len(p.q) == 0 {
		p.armed = 0
		return 0, released, false
	}
	next = p.q[0].at
	if next-p.spin > now {
		p.arm(next - p.spin)
	} else {
		p.armed = 0
	}
	return next, released, false
}

// waitHeap is a min-heap of waiters by deadline.
type waitHeap []*waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
