//go:build linux

package stamp

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/clock"
)

// A kernel-stamped stream does not need its reader to run the moment its
// bytes arrive: the kernel stamped them already. So its sockets are not
// left to Go's netpoller, which wakes a goroutine (and often a thread) per
// arrival and has each Read try recvmsg once in vain before it parks: two
// system calls and a wake-up per event. They are taken out of it and
// waited for here instead, in one epoll set per process, in batches:
//
//   - poller: one goroutine waits on the epoll set (edge-triggered), marks
//     the sockets that became readable or writable and wakes their
//     waiting readers and writers; after a batch it sleeps pollBatch, so
//     that under load one wait-up serves the arrivals of that time
//     together instead of one each.
//   - pollConn: the socket as a net.Conn over its own descriptor. A Read
//     tries recvmsg only after an edge said bytes came (or its last read
//     filled the buffer), so the recvmsg that finds nothing is gone; it
//     waits on a channel the poller, the deadline timer and Close poke.
//
// The cost is up to pollBatch between an arrival and its read, which moves
// no stamp (the kernel's is kept); only in kernel mode, events of one
// stream closer together than that may be read at once and share the
// later stamp, as events queued behind a late reader always did
// (kernel-offset splits them with the observer).

// useRing lets a new poller read its pushed connections in batches
// through an io_uring (ringread_linux.go); tests turn it off to cover the
// reads one at a time that a host without io_uring makes.
var useRing = true

// pollBatch is how long the poller sleeps after a batch of edges once
// they come faster than pollBatchRate a second from at least
// pollBatchStreams sockets (batcher): it bounds the wake-ups to about
// 1/pollBatch a second (a millisecond is also the finest sleep Go's
// timers give an otherwise idle process). Slower or fewer, the poller
// waits for the next edge at once, and idle it blocks in epoll_wait and
// costs nothing.
var (
	pollBatch        = time.Millisecond
	pollBatchRate    = 2000
	pollBatchStreams = 32
)

// poller is the process's epoll set of stamped sockets and the goroutine
// that waits on it, started with the first socket and stopped after the
// last one left (acquirePoller, releasePoller). The goroutine blocks in
// epoll_wait, keeping its P meanwhile as any blocking system call does, so
// that it runs again the moment an edge comes even when every P is busy
// (a goroutine woken by Go's netpoller would queue behind the others, and
// the reads with it). The set is not nested in Go's netpoller, whose
// every wait would then also report each edge of the set.
type poller struct {
	epfd  int
	evfd  int // an eventfd in the set: written to stop the loop
	mu    sync.Mutex
	conns []*pollConn // by slot; nil: free
	free  []int32
	gen   uint32 // the last generation handed out (epoll data: slot, gen)
	done  chan struct{}
	ring  *ringReader // reads pushed connections in batches; nil: one at a time
}

var (
	pollersMu sync.Mutex
	thePoller *poller
	pollUsers int
)

// acquirePoller returns the process's poller, starting it if need be; each
// acquire is matched by a releasePoller.
func acquirePoller() (*poller, error) {
	pollersMu.Lock()
	defer pollersMu.Unlock()
	if thePoller == nil {
		p, err := startPoller()
		if err != nil {
			return nil, err
		}
		thePoller = p
	}
	pollUsers++
	return thePoller, nil
}

// releasePoller stops the poller when its last user left.
func releasePoller() {
	pollersMu.Lock()
	defer pollersMu.Unlock()
	if pollUsers--; pollUsers > 0 || thePoller == nil {
		return
	}
	p := thePoller
	thePoller = nil
	one := [8]byte{1}
	unix.Write(p.evfd, one[:])
	<-p.done
	unix.Close(p.evfd)
	unix.Close(p.epfd)
}

// stopSlot is the epoll data of the poller's eventfd.
const stopSlot = -1

func startPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: stopSlot}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	p := &poller{epfd: epfd, evfd: evfd, done: make(chan struct{})}
	if useRing {
		p.ring = newRingReader()
	}
	go p.loop()
	return p, nil
}

// loop hands out edges until the eventfd is written: a pushed
// connection's (push_linux.go) are served here, the others' wake their
// readers.
func (p *poller) loop() {
	defer close(p.done)
	defer func() { p.ring.close() }()
	evs := make([]unix.EpollEvent, 512)
	b := newBatcher(pollBatchRate, pollBatchStreams)
	var pushed, again []*Conn // edges of pushed connections; those with bytes left
	var buf []byte            // the pushed connections' reads
	for {
		wait := -1
		if len(again) > 0 {
			wait = 0 // only what came meanwhile: the turns of those left come first
		}
		n, err := unix.EpollWait(p.epfd, evs, wait)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			panic(fmt.Sprintf("stamp: epoll_wait: %v", err)) // EBADF/EFAULT/EINVAL: a bug here, not a condition
		}
		drainTap()
		pushed = append(pushed[:0], again...)
		clear(again)
		again = again[:0]
		readied := false // a goroutine was woken: it must not wait for this P's sleep
		p.mu.Lock()
		for i := range evs[:n] {
			e := &evs[i]
			if e.Fd == stopSlot {
				p.mu.Unlock()
				return
			}
			if int(e.Fd) >= len(p.conns) {
				continue
			}
			c := p.conns[e.Fd]
			if c == nil || c.gen != uint32(e.Pad) {
				continue // a socket that left since the edge
			}
			b.socket(&c.window)
			if e.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				c.hup.Store(true)
			}
			if e.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				// rready first: Push sets pushing first, then looks at
				// rready, so one of the two sees the other's write.
				c.rready.Store(true)
				if o := c.owner.Load(); o != nil && o.pushing.Load() {
					pushed = append(pushed, o)
				} else {
					poke(c.rwake)
					readied = true
				}
			}
			if e.Events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				c.wready.Store(true)
				poke(c.wwake)
				readied = true
			}
		}
		p.mu.Unlock()
		if len(pushed) > 0 && buf == nil {
			buf = make([]byte, pushBufSize)
		}
		if len(pushed) > 1 && p.ring != nil {
			var woke, ok bool
			again, woke, ok = p.ring.serve(pushed, again)
			readied = readied || woke
			if !ok { // the ring failed (out of kernel memory): read as without one
				p.ring.close()
				p.ring = nil
			}
			clear(pushed)
			pushed = pushed[:0]
		}
		for i, c := range pushed {
			more, woke := c.pushEdge(buf)
			if more {
				again = append(again, c)
			}
			readied = readied || woke
			pushed[i] = nil
		}
		if len(again) == 0 && b.woke(n, n == len(evs), clock.Mono()) {
			batchSleep(readied)
		}
	}
}

// batchSleep waits pollBatch between batches. With more than one P it
// sleeps in a system call, keeping its P: parking instead (time.Sleep)
// costs a timer, an idle P and an M put to sleep and woken again on
// every batch, a fifth of the client's CPU per event at 10,800 streams.
// The goroutines the batch woke (readied) were queued on this P, where
// they would wait out the sleep unless another P took them: they run
// first (Gosched). With one P that P is the only one the rest of the
// process has, so it parks.
func batchSleep(readied bool) {
	if runtime.GOMAXPROCS(0) == 1 {
		time.Sleep(pollBatch)
		return
	}
	if readied {
		runtime.Gosched()
	}
	ts := unix.NsecToTimespec(int64(pollBatch))
	unix.Nanosleep(&ts, nil)
}

// poke leaves a token in a wake channel unless one is there already.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// add puts fd in the set, edge-triggered, for c.
func (p *poller) add(c *pollConn) error {
	p.mu.Lock()
	var slot int32
	if n := len(p.free); n > 0 {
		slot, p.free = p.free[n-1], p.free[:n-1]
	} else {
		slot = int32(len(p.conns))
		p.conns = append(p.conns, nil)
	}
	p.gen++
	c.slot, c.gen = slot, p.gen
	p.conns[slot] = c
	p.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: slot, Pad: int32(c.gen)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		p.remove(c)
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// remove takes c out of the set (before its descriptor closes).
func (p *poller) remove(c *pollConn) {
	unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	p.mu.Lock()
	if p.conns[c.slot] == c {
		p.conns[c.slot] = nil
		p.free = append(p.free, c.slot)
	}
	p.mu.Unlock()
}

// pollConn is a TCP socket taken out of Go's netpoller and waited for by
// the poller: a net.Conn over its own descriptor, with deadlines and a
// Close that wakes a blocked Read or Write.
type pollConn struct {
	fd           int
	p            *poller
	slot         int32
	gen          uint32
	window       uint32               // the batcher window this socket last had an edge in (the poller's goroutine only)
	owner        atomic.Pointer[Conn] // the stamping Conn over this socket, for its push (push_linux.go)
	laddr, raddr net.Addr

	// mu is held for reading around every system call on fd and for
	// writing to close it, so a descriptor number is never reused under
	// a call in flight.
	mu   sync.RWMutex
	shut atomic.Bool

	// rready, wready: an edge came since the last try (or the last try
	// may have left bytes or room); hup: the peer closed or the socket
	// failed, so every read tries.
	rready, wready, hup atomic.Bool
	rwake, wwake        chan struct{}
	rdl, wdl            pollDeadline
}

// newPollConn takes tc's socket out of Go's netpoller: a duplicate of its
// descriptor joins the poller and tc is closed (which removes the
// original from the netpoller; the socket lives on in the duplicate).
func newPollConn(tc *net.TCPConn) (*pollConn, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("dup: %w", derr)
	}
	p, err := acquirePoller()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	c := &pollConn{fd: fd, p: p, laddr: tc.LocalAddr(), raddr: tc.RemoteAddr(),
		rwake: make(chan struct{}, 1), wwake: make(chan struct{}, 1)}
	c.rready.Store(true)
	c.wready.Store(true)
	c.rdl.wake, c.wdl.wake = c.rwake, c.wwake
	if err := p.add(c); err != nil {
		unix.Close(fd)
		releasePoller()
		return nil, err
	}
	tc.Close()
	return c, nil
}

// rawRead calls fn with the descriptor until it returns true, after an
// edge each time but the first (fn returning false means EAGAIN). fn
// tells, through full, whether its read filled the buffer: then bytes may
// be left that no new edge will announce, and the next read tries at once.
func (c *pollConn) rawRead(fn func(fd uintptr) (done, full bool)) error {
	for {
		if err := c.check(&c.rdl); err != nil {
			return err
		}
		if !c.rready.Swap(false) && !c.hup.Load() {
			<-c.rwake
			continue
		}
		c.mu.RLock()
		if c.shut.Load() {
			c.mu.RUnlock()
			continue // check says so
		}
		done, full := fn(uintptr(c.fd))
		c.mu.RUnlock()
		if done {
			if full {
				c.rready.Store(true)
			}
			return nil
		}
	}
}

func (c *pollConn) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		if err := c.check(&c.wdl); err != nil {
			return written, c.opErr("write", err)
		}
		if !c.wready.Swap(false) {
			<-c.wwake
			continue
		}
		c.mu.RLock()
		if c.shut.Load() {
			c.mu.RUnlock()
			continue
		}
		n, err := unix.Write(c.fd, b[written:])
		c.mu.RUnlock()
		if n > 0 {
			written += n
		}
		switch {
		case err == nil && written == len(b):
			c.wready.Store(true) // there was room for all of it: there may be more
		case err == nil || err == unix.EAGAIN || err == unix.EINTR:
			// a short write: the send buffer is full until an edge says otherwise
		default:
			return written, c.opErr("write", os.NewSyscallError("write", err))
		}
	}
	return written, nil
}

// check returns the error a Read or Write meets before it tries: the
// socket closed, or the direction's deadline passed.
func (c *pollConn) check(dl *pollDeadline) error {
	if c.shut.Load() {
		return net.ErrClosed
	}
	if dl.expired.Load() {
		return os.ErrDeadlineExceeded
	}
	return nil
}

func (c *pollConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: err}
}

// Close takes the socket out of the poller, wakes a blocked Read and
// Write, and closes the descriptor once no call on it is in flight.
func (c *pollConn) Close() error {
	if c.shut.Swap(true) {
		return c.opErr("close", net.ErrClosed)
	}
	c.p.remove(c)
	poke(c.rwake)
	poke(c.wwake)
	c.rdl.stop()
	c.wdl.stop()
	c.mu.Lock()
	err := unix.Close(c.fd)
	c.mu.Unlock()
	releasePoller()
	if err != nil {
		return c.opErr("close", os.NewSyscallError("close", err))
	}
	return nil
}

func (c *pollConn) LocalAddr() net.Addr  { return c.laddr }
func (c *pollConn) RemoteAddr() net.Addr { return c.raddr }

func (c *pollConn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}
func (c *pollConn) SetReadDeadline(t time.Time) error  { c.rdl.set(t); return nil }
func (c *pollConn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

// pollDeadline is one direction's deadline: expired once it passed, set
// at once for a time already past, else by a timer that pokes wake so
// that a blocked call sees it. The deadline is kept on the monotonic
// clock, as timers run, so a slewed wall clock moves neither. Each new
// deadline gets a timer of its own (the old one stopped): a stopped
// AfterFunc timer moved from far ahead to near by Reset was seen not to
// fire at all under load. A timer of an older deadline that fires anyway
// finds the deadline not reached and does nothing.
type pollDeadline struct {
	mu      sync.Mutex
	t       *time.Timer
	at      int64 // clock.Mono ns; 0: none
	expired atomic.Bool
	wake    chan struct{}
}

func (d *pollDeadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.t != nil {
		d.t.Stop()
		d.t = nil
	}
	if t.IsZero() {
		d.at = 0
		d.expired.Store(false)
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		d.at = 0
		d.expired.Store(true)
		poke(d.wake)
		return
	}
	// at is read before the timer starts, so the timer never fires before it.
	d.at = clock.Mono() + int64(wait)
	d.expired.Store(false)
	d.t = time.AfterFunc(wait, d.fire)
}

func (d *pollDeadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == 0 || clock.Mono() < d.at {
		return
	}
	d.expired.Store(true)
	poke(d.wake)
}

func (d *pollDeadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = 0
	if d.t != nil {
		d.t.Stop()
	}
}
