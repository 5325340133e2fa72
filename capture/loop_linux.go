package capture

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/clock"
)

// evloop forwards response bodies from its own epoll instance: while a
// body streams, its upstream socket is registered here (edge-triggered,
// with EPOLLRDHUP) and the loop's goroutine, on each arrival, reads it once
// into the loop's buffer, writes those bytes to the client socket and
// parses them (rawBody.process), all on one goroutine with no wake-up of
// the request's goroutine, which waits until the body ended. A read
// shorter than the buffer drained the socket (any later arrival raises a
// new edge), so it is not followed by a read that says EAGAIN, unless the
// event said the peer hung up (EPOLLRDHUP: the end of file is read too).
//
// A write the client socket cannot take at once (a slow client) hands the
// body back to its goroutine with the bytes not yet written (pending), and
// the rest is forwarded there as before, through the runtime's poller.
// The request's goroutine holds both sockets (inside their RawConn
// callbacks) while the loop uses their descriptors, so a concurrent Close
// waits and a descriptor is never reused under the loop; the watcher's
// abort shuts the upstream socket down instead (shutdownConn), which the
// loop sees as its end of file.
type evloop struct {
	epfd  int
	wake  int // eventfd: written by close
	buf   []byte
	stats *loopStats

	mu   sync.Mutex
	jobs []*loopJob // by upstream descriptor
	done chan struct{}
}

// loopJob is one body being forwarded by a loop.
type loopJob struct {
	b       *rawBody
	fd      int
	ended   bool          // the body is over (process returned false)
	aborted bool          // under the loop's mu: the watcher's abort came
	done    chan struct{} // closed once the loop let go of the job
}

const loopBuf = 32 << 10

// newEvloops starts n loops; nil when epoll is unavailable (the bodies are
// then forwarded by their goroutines).
func newEvloops(n int, st *loopStats) []*evloop {
	var ls []*evloop
	for range n {
		l, err := newEvloop(st)
		if err != nil {
			break
		}
		ls = append(ls, l)
	}
	return ls
}

func newEvloop(st *loopStats) (*evloop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, err
	}
	l := &evloop{epfd: epfd, wake: wake, buf: make([]byte, loopBuf), stats: st, done: make(chan struct{})}
	go l.run()
	return l, nil
}

// close ends the loop; no job may be registered (Proxy.Close calls it once
// every handler returned).
func (l *evloop) close() {
	var one = [8]byte{1}
	unix.Write(l.wake, one[:])
	<-l.done
	unix.Close(l.epfd)
	unix.Close(l.wake)
}

// forward registers j's upstream descriptor and waits until the loop let
// go of it: the body ended (j.ended), or the client socket could not take
// a write at once (j.b.w.pending holds the bytes not yet written). An
// error means the descriptor could not be registered (nothing was read).
func (l *evloop) forward(j *loopJob) error {
	ufd := j.fd
	l.mu.Lock()
	if ufd >= len(l.jobs) {
		l.jobs = append(l.jobs, make([]*loopJob, ufd+1-len(l.jobs)+64)...)
	}
	l.jobs[ufd] = j
	if j.aborted {
		unix.Shutdown(ufd, unix.SHUT_RDWR) // read as end of file at once
	}
	l.mu.Unlock()
	// Adding reports what is already readable, so no arrival is missed.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(ufd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, ufd, &ev); err != nil {
		l.mu.Lock()
		l.jobs[ufd] = nil
		l.mu.Unlock()
		return err
	}
	<-j.done
	return nil
}

// abort is the watcher's abort while j is the loop's: its socket is shut
// down, which the loop reads as end of file (before j is registered,
// forward does it).
func (l *evloop) abort(j *loopJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j.aborted = true
	if j.fd < len(l.jobs) && l.jobs[j.fd] == j {
		unix.Shutdown(j.fd, unix.SHUT_RDWR)
	}
}

func (l *evloop) run() {
	defer close(l.done)
	events := make([]unix.EpollEvent, 128)
	jobs := make([]*loopJob, 128)
	for {
		n, err := unix.EpollWait(l.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			runtime.Gosched()
			continue
		}
		l.mu.Lock()
		for i := range n {
			fd := int(events[i].Fd)
			jobs[i] = nil
			if fd != l.wake && fd < len(l.jobs) {
				jobs[i] = l.jobs[fd]
			}
		}
		l.mu.Unlock()
		for i := range n {
			if int(events[i].Fd) == l.wake {
				return
			}
			if j := jobs[i]; j != nil {
				l.serve(j, events[i].Events)
				jobs[i] = nil
			}
		}
	}
}

// serve reads what arrived for j and forwards it; when the body is over or
// a write is pending it lets go of j.
func (l *evloop) serve(j *loopJob, mask uint32) {
	hup := mask&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
	for {
		n, err := unix.Read(j.fd, l.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return
		}
		t := clock.Mono()
		if err == nil && n == 0 {
			err = io.EOF
		}
		if n < 0 {
			n = 0
		}
		if !j.b.process(l.buf[:n], t, err) {
			j.ended = true
			l.release(j)
			return
		}
		if len(j.b.w.pending) > 0 {
			l.release(j)
			return
		}
		if n < len(l.buf) && !hup {
			return // drained: the next arrival raises a new edge
		}
	}
}

// release deregisters j and hands it back to its goroutine.
func (l *evloop) release(j *loopJob) {
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, j.fd, nil)
	l.mu.Lock()
	l.jobs[j.fd] = nil
	l.mu.Unlock()
	close(j.done)
}

// viaLoop forwards the rest of b's body on l and reports whether the body
// is over. The upstream socket leaves the runtime's poller for it (a
// descriptor the runtime also watches would wake its poller on every
// arrival for nothing): detach duplicates the descriptor and closes the
// connection, and a connection to keep, or whose body comes back to its
// goroutine (a slow client: false, the pending bytes written by then), is
// made again from the descriptor (attach). False also when the loop could
// not take the body: the caller forwards it itself.
func (b *rawBody) viaLoop(l *evloop, uc *upConn) bool {
	st := l.stats
	tc, ok := uc.c.(*net.TCPConn)
	if !ok {
		return false
	}
	cs, ok := b.w.cc.c.(syscall.Conn)
	if !ok {
		return false
	}
	crc, err := cs.SyscallConn()
	if err != nil {
		return false
	}
	ufd, err := detach(tc)
	if err != nil {
		return false
	}
	watch := &b.w.cc.watch
	j := &loopJob{b: b, fd: ufd, done: make(chan struct{})}
	watch.setAbort(func() { l.abort(j) })
	started := false
	var ferr error
	werr := crc.Write(func(cfd uintptr) bool {
		b.w.raw, b.w.rawFd = true, int(cfd)
		ferr = l.forward(j)
		b.w.raw = false
		started = ferr == nil
		return true
	})
	switch {
	case werr != nil: // the client connection was closed (cut)
		b.res.clientGone, b.reuse = true, false
	case !started:
		b.process(nil, clock.Mono(), fmt.Errorf("forwarding the body: %w", ferr))
	}
	if started {
		st.bodies.Add(1)
	}
	over := j.ended || b.complete || b.res.clientGone || !started
	if !over || b.complete && b.reuse {
		c, err := attach(ufd)
		if err != nil {
			b.reuse = false
			if !over {
				b.process(nil, clock.Mono(), fmt.Errorf("forwarding the body: %w", err))
				over = true
			}
		} else {
			uc.c = c
			uc.br.Reset(c)
			watch.setAbort(shutdownConn(c))
		}
	} else {
		unix.Close(ufd)
		b.reuse = false
	}
	// What the client socket did not take, in every case: the body's end
	// may be among it.
	if len(b.w.pending) > 0 && !b.res.clientGone {
		st.handbacks.Add(1)
		p := b.w.pending
		b.w.pending = nil
		if _, err := b.w.cc.c.Write(p); err != nil {
			b.w.broken = true
			b.w.gone.Store(true)
			b.res.clientGone = true
		}
	}
	return over || b.res.clientGone
}

// detach takes c's socket out of the runtime: a duplicate of its
// descriptor (non-blocking, as the socket is), and c closed, which
// removes it from the runtime's poller.
func detach(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	c.Close()
	return fd, nil
}

// attach makes a connection of a detached socket again (fd is closed).
func attach(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "upstream")
	c, err := net.FileConn(f)
	f.Close()
	return c, err
}

// rawWrite writes p to a non-blocking socket as far as it takes it at
// once: n bytes, and EAGAIN when it took fewer.
func rawWrite(fd int, p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := unix.Write(fd, p[written:])
		if n > 0 {
			written += n
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// shutdownConn shuts c down both ways without closing it (the watcher's
// abort): whoever reads it (its goroutine or a loop) reads end of file,
// the upstream sees the request end, and the descriptor stays its owner's
// to close.
func shutdownConn(c net.Conn) func() {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return func() { c.Close() }
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() { c.Close() }
	}
	return func() {
		rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	}
}
