package clock

import (
	"container/heap"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Precise wakes goroutines at absolute instants of Mono. This is the Linux
// one, built on the Go netpoller (precise_other.go is the portable
// fallback on Go timers). One goroutine parks on a non-blocking
// CLOCK_MONOTONIC timerfd armed with an absolute deadline
// (TFD_TIMER_ABSTIME) and registered with the runtime's epoll set, so the
// kernel wakes the thread blocked in epoll_wait at the earliest pending
// release with hrtimer precision (a timerfd takes no timer slack). The
// goroutine hands every due waiter its token and parks again: the waiters
// run on the same P with no locked thread, no blocking syscall and no
// thread handoff. A caller adding a release earlier than the armed one
// re-arms the timerfd itself.
//
// Each waiter is released margin early and busy-waits the rest itself
// (spinMargin, spin.go), so the kernel's wake-up lateness and the hop to
// the waiter are hidden inside the margin (BENCHMARKS.md, "Dispatch lag",
// has the figures).
//
// Waiters are pooled: a wait in steady state allocates nothing.
type Precise struct {
	spin spinMargin // how early waiters are released, and its adaptation

	tfd int
	f   *os.File        // the timerfd, owned; its poller registration parks loop
	rc  syscall.RawConn // f's raw access for reads that park in the poller

	mu       sync.Mutex
	q        waitHeap
	armed    int64 // release the timerfd is armed for, 0 if disarmed
	closed   bool
	isClosed atomic.Bool // closed, readable without mu by released waiters

	// For NextDue, without mu: the earliest queued deadline (0: none) and
	// the latest deadline released so far.
	next     atomic.Int64
	released atomic.Int64

	done chan struct{}
	pool sync.Pool
}

// waiter is one pending WaitUntil.
type waiter struct {
	at    int64         // the deadline; the heap's order
	rel   int64         // when the dispatcher released it: at - the margin then
	index int           // in the heap, -1 when not queued
	ch    chan struct{} // buffered(1): the dispatcher never blocks on a send
}

// NewPrecise starts the waking goroutine. spin is how long before its
// deadline each waiter is released to busy-wait the rest: 0 never spins,
// AdaptiveSpin follows the measured wake-up lateness. Close stops it.
func NewPrecise(spin time.Duration) (*Precise, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("creating a timerfd: %w", err)
	}
	// A non-blocking fd makes os.NewFile register it with the netpoller.
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("registering a timerfd with the poller: %w", err)
	}
	p := &Precise{tfd: fd, f: f, rc: rc, done: make(chan struct{})}
	p.spin.init(spin)
	p.pool.New = func() any { return &waiter{index: -1, ch: make(chan struct{}, 1)} }
	go p.loop()
	return p, nil
}

// NextDue is the deadline of the next waiter to return: the latest one
// released if it is still spinning to its deadline, else the earliest
// queued; 0 when none waits. Other work can keep clear of the instants
// where a wake-up must be prompt (replay's media makers pause there).
func (p *Precise) NextDue() int64 {
	if at := p.released.Load(); at > Mono() {
		return at
	}
	return p.next.Load()
}

// setNext publishes the heap's earliest deadline for NextDue. p.mu must be
// held.
func (p *Precise) setNext() {
	if len(p.q) == 0 {
		p.next.Store(0)
		return
	}
	p.next.Store(p.q[0].at)
}

// Margin is how long before its deadline a waiter is now released.
func (p *Precise) Margin() time.Duration { return time.Duration(p.spin.margin.Load()) }

// Close stops the dispatcher and releases every waiter still queued (their
// WaitUntil returns early, with a negative lag). It is safe to call twice.
func (p *Precise) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return nil
	}
	p.closed = true
	p.isClosed.Store(true)
	p.arm(1) // fire now: wakes the parked read
	p.mu.Unlock()
	<-p.done
	return p.f.Close()
}

// WaitUntil blocks until Mono() >= at and returns the lag (Mono() on
// return minus at) in nanoseconds, or ctx's error if ctx ends first.
func (p *Precise) WaitUntil(ctx context.Context, at int64) (int64, error) {
	if at-Mono() <= 0 {
		return Mono() - at, nil
	}
	w := p.pool.Get().(*waiter)
	w.at = at
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.pool.Put(w)
		return 0, fmt.Errorf("waiting for %v: clock.Precise closed", time.Duration(at-Mono()))
	}
	heap.Push(&p.q, w)
	if w.index == 0 {
		p.next.Store(at)
	}
	if rel := at - p.spin.margin.Load(); w.index == 0 && (p.armed == 0 || rel < p.armed) {
		p.arm(rel)
	}
	p.mu.Unlock()

	select {
	case <-w.ch:
		rel := w.rel
		p.pool.Put(w)
		now := Mono()
		if p.isClosed.Load() {
			return now - at, nil
		}
		p.spin.record(now-rel, now)
		return spinUntil(now, at) - at, nil
	case <-ctx.Done():
		p.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&p.q, w.index)
			p.setNext()
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
	// A raw syscall: timerfd_settime never blocks, and the runtime's
	// syscall bookkeeping would wake sysmon, which then polls every 20 us
	// (measured: 14% of the dispatcher's CPU). It cannot fail with a valid
	// fd and spec; a failure would only delay.
	unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(p.tfd), unix.TFD_TIMER_ABSTIME,
		uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	p.armed = at
}

// loop is the waking goroutine.
func (p *Precise) loop() {
	defer close(p.done)
	var buf [8]byte
	var rerr error
	wait := func(fd uintptr) bool {
		// Raw, as in arm: a timerfd read never blocks (TFD_NONBLOCK).
		_, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		rerr = nil
		if errno != 0 {
			rerr = errno
		}
		return errno != unix.EAGAIN // false: park in the poller until readable
	}
	for {
		// Adapted first: the release below and the re-arm use the new margin
		// for every queued waiter.
		p.spin.maybeAdapt(Mono())
		if p.release() {
			return
		}
		// Parks until the armed release (or a re-arm to an earlier one);
		// the released waiters run on this P meanwhile.
		if err := p.rc.Read(wait); err != nil || (rerr != nil && rerr != unix.EINTR) {
			return // the fd is broken: waiters fall back to their contexts
		}
	}
}

// release hands every due waiter its token and re-arms the timer for the
// next one. It reports whether the dispatcher is closed; when closed it
// releases every waiter.
func (p *Precise) release() (closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := Mono()
	margin := p.spin.margin.Load()
	for len(p.q) > 0 && (p.closed || p.q[0].at-margin <= now) {
		w := heap.Pop(&p.q).(*waiter)
		w.rel = w.at - margin
		p.released.Store(max(p.released.Load(), w.at))
		w.ch <- struct{}{}
	}
	p.setNext()
	if p.closed {
		return true
	}
	if len(p.q) == 0 {
		p.armed = 0
		return false
	}
	p.arm(p.q[0].at - margin)
	return false
}

// waitHeap is a min-heap of waiters by release time.
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
