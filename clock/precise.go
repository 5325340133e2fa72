package clock

import (
	"container/heap"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Precise wakes goroutines at absolute instants of Mono, built on the Go
// netpoller. One goroutine parks on
// a non-blocking CLOCK_MONOTONIC timerfd armed with an absolute deadline
// (TFD_TIMER_ABSTIME) and registered with the runtime's epoll set, so the
// kernel wakes the thread blocked in epoll_wait at the earliest pending
// release with hrtimer precision (a timerfd takes no timer slack). The
// goroutine hands every due waiter its token and parks again: the waiters
// run on the same P with no locked thread, no blocking syscall and no
// thread handoff. A caller adding a release earlier than the armed one
// re-arms the timerfd itself.
//
// Each waiter is released margin early and busy-waits the rest itself
// (yielding its P between clock reads), so the kernel's wake-up lateness
// (~35 us on a VM) and the hop to the waiter are hidden inside the margin:
//
//	release = at - margin,  lag = max(0, wake - release - margin)
//
// With AdaptiveSpin the margin follows the recent wake-up lateness: every
// spinWindow/4 wakes it is set to the spinQuantile of the last spinWindow
// lateness samples (wake - release), capped at maxSpin. The busy-wait then
// costs margin - lateness per wake: about the lateness's p90-p50 spread,
// ~20 us, i.e. ~0.1 core at 5,000 wakes/s.
//
// Waiters are pooled: a wait in steady state allocates nothing.
type Precise struct {
	fixed    int64        // margin in ns when not adaptive
	adaptive bool         // margin from the measured lateness
	margin   atomic.Int64 // ns each waiter is released before its deadline

	tfd int
	f   *os.File        // the timerfd, owned; its poller registration parks loop
	rc  syscall.RawConn // f's raw access for reads that park in the poller

	mu       sync.Mutex
	q        waitHeap
	armed    int64 // release the timerfd is armed for, 0 if disarmed
	closed   bool
	isClosed atomic.Bool // closed, readable without mu by released waiters

	// Lateness samples (wake - release, ns) of released waiters: a ring
	// the waiters write and loop reads to adapt the margin.
	lateN   atomic.Uint64
	late    [spinWindow]atomic.Int64
	scratch [spinWindow]int64 // loop's sorting space

	done chan struct{}
	pool sync.Pool
}

// AdaptiveSpin, given to NewPrecise, makes the busy-wait margin follow the
// measured wake-up lateness.
const AdaptiveSpin time.Duration = -1

// Measured with BenchmarkDispatchLag at 5,000 wake-ups/s on the 2-core
// firecracker VM, quiet: AdaptiveSpin p50 0.05 us, p99 36-106 us, 0.21
// core; no spin p50 48-57 us, p99 81-98 us, 0.18-0.21 core; the previous
// design (a locked thread blocking in read(2) on the timerfd) p50 43-87 us,
// p99 128-373 us, 0.24-0.31 core. On a loaded machine every variant's p99
// is whatever other processes take (0.5-3 ms). replay uses AdaptiveSpin;
// the mock uses no spin (its events may be a few tens of us late, and it
// must not burn the client's CPU).

const (
	spinWindow   = 256                           // lateness samples the margin is computed from
	spinQuantile = 0.875                         // of the lateness, covered by the margin
	maxSpin      = int64(100 * time.Microsecond) // caps the busy-wait (and its CPU) per wake
)

// waiter is one pending WaitUntil.
type waiter struct {
	at    int64         // the deadline
	rel   int64         // when the dispatcher releases it: at - margin
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
	switch {
	case spin == AdaptiveSpin:
		p.adaptive = true
		p.margin.Store(int64(50 * time.Microsecond)) // a first guess until samples come
	case spin > 0:
		p.fixed = int64(spin)
		p.margin.Store(p.fixed)
	}
	p.pool.New = func() any { return &waiter{index: -1, ch: make(chan struct{}, 1)} }
	go p.loop()
	return p, nil
}

// Margin is how long before its deadline a waiter is now released.
func (p *Precise) Margin() time.Duration { return time.Duration(p.margin.Load()) }

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
	w.rel = at - p.margin.Load()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.pool.Put(w)
		return 0, fmt.Errorf("waiting for %v: clock.Precise closed", time.Duration(at-Mono()))
	}
	heap.Push(&p.q, w)
	if w.index == 0 && (p.armed == 0 || w.rel < p.armed) {
		p.arm(w.rel)
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
		if p.adaptive {
			p.late[p.lateN.Add(1)%spinWindow].Store(now - rel)
		}
		for ; now < at; now = Mono() {
			runtime.Gosched() // the P stays free for the dispatcher and other waiters
		}
		return now - at, nil
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
	adapted := uint64(0)
	for {
		if p.release() {
			return
		}
		if n := p.lateN.Load(); p.adaptive && n-adapted >= spinWindow/4 && n >= spinWindow {
			adapted = n
			p.adapt()
		}
		// Parks until the armed release (or a re-arm to an earlier one);
		// the released waiters run on this P meanwhile.
		if err := p.rc.Read(wait); err != nil || (rerr != nil && rerr != unix.EINTR) {
			return // the fd is broken: waiters fall back to their contexts
		}
	}
}

// adapt sets the margin to the spinQuantile of the recent lateness.
func (p *Precise) adapt() {
	for i := range p.late {
		p.scratch[i] = p.late[i].Load()
	}
	slices.Sort(p.scratch[:])
	m := p.scratch[spinWindow*spinQuantile]
	p.margin.Store(max(0, min(m, maxSpin)))
}

// release hands every due waiter its token and re-arms the timer for the
// next one. It reports whether the dispatcher is closed; when closed it
// releases every waiter.
func (p *Precise) release() (closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := Mono()
	for len(p.q) > 0 && (p.closed || p.q[0].rel <= now) {
		w := heap.Pop(&p.q).(*waiter)
		w.ch <- struct{}{}
	}
	if p.closed {
		return true
	}
	if len(p.q) == 0 {
		p.armed = 0
		return false
	}
	p.arm(p.q[0].rel)
	return false
}

// waitHeap is a min-heap of waiters by release time.
type waitHeap []*waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].rel < h[j].rel }
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
