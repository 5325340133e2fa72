package h1proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/clock"
)

// evloop owns the proxy's upstream sockets and forwards response bodies
// from its own epoll instance. A connection the pool dials is taken off the
// runtime's poller once (own) and registered here for its whole life,
// edge-triggered, for input, output and the peer's hang-up; it is never
// moved back. The loop takes what its epoll instance has ready without
// waiting; when nothing is, it waits for the instance itself to become
// readable on the runtime's poller (the epoll descriptor nests there), so
// an idle loop parks like any goroutine instead of blocking a thread in
// epoll_wait, which made the runtime hand the loop's P off and wake
// threads to take it back. While no response is being forwarded, an event
// only marks the socket ready and wakes its owner if it waits
// (rawSock.await: writing the request, reading a head the loop handed
// back, or a body its goroutine forwards). Once the request is sent, the
// response goes to the loop (forward): it reads the head, and a plain one
// (head.go) it parses and writes to the client with the first events,
// without waking the request's goroutine, which would otherwise have to
// be scheduled before the first event could go on; any other head it
// hands back with the bytes it read. While a body streams, the loop's
// goroutine, on each arrival,
// reads the socket once into the loop's buffer, writes those bytes to the
// client socket and tells them, stamped, to the tap (rawBody.process;
// Response.Loop asks it to keep them for parsing later), all on one goroutine
// with no wake-up of the request's goroutine, which waits until the body
// ended. A read shorter than the buffer drained the socket (any later
// arrival raises a new edge), so it is not followed by a read that says
// EAGAIN, unless the event said the peer hung up (EPOLLRDHUP: the end of
// file is read too).
//
// A write the client socket cannot take at once (a slow client) hands the
// body back to its goroutine with the bytes not yet written (pending), and
// the rest is forwarded there through the socket's waits. The request's
// goroutine holds the client socket (inside its RawConn callback) while
// the loop uses its descriptor, and owns the upstream socket: it closes it
// only once the loop let go of its body, and close and shutdown are
// ordered under the loop's mu, so a descriptor is never reused under the
// loop or shut down after it was closed. The watcher's abort shuts the
// upstream socket down (rawSock.shutdown), which the loop, or a waiting
// read, sees as its end of file.
type evloop struct {
	epfd  int
	pfd   *os.File // epfd on the runtime's poller (nil: the loop blocks in epoll_wait)
	wake  int      // eventfd: written by close
	buf   []byte
	stats *loopStats

	// released are the jobs the batch being served let go of, handed
	// back together once it is served (dispatch): readying a goroutine
	// can wake an idle thread to run it, and one wake-up per finished body
	// in the middle of a batch gives the kernel a thread to run in the
	// loop's place while the batch still waits (docs/design/capture-proxy.md).
	// Only the loop's goroutine touches it.
	released []*loopJob

	mu    sync.Mutex
	socks []*rawSock // by descriptor
	gen   int32      // the last socket's generation
	done  chan struct{}
}

// rawSock is an upstream socket an evloop owns: a non-blocking descriptor
// registered with the loop's epoll instance, its events tagged with the
// socket's generation (an event for a closed socket whose descriptor was
// reused is told apart and dropped).
type rawSock struct {
	l   *evloop
	fd  int
	gen int32
	ch  chan struct{} // wakes a waiting owner; capacity 1

	// Under l.mu. rready (wready) says the socket may be readable
	// (writable): an edge came, or a try did not find it drained, since the
	// last try that did (EAGAIN, or a read shorter than its buffer).
	// False means the next arrival raises an edge, so waiting cannot miss
	// it.
	job            *loopJob // the body the loop forwards now
	rready, wready bool
	waitR, waitW   bool // the owner waits on ch for that mark
	hup            bool // the peer hung up (an edge said so): a short read did not drain the end of file
	closed         bool
}

var _ upSock = (*rawSock)(nil)

// loopJob is one response being forwarded by a loop: its body, or its
// head first (rawBody.headOnLoop).
type loopJob struct {
	b     *rawBody
	s     *rawSock
	ended bool          // the body is over (process returned false)
	done  chan struct{} // closed once the loop let go of the job
	// head: the loop reads the head first; pre holds what it read of it
	// over earlier reads, then, when it hands the head back (back), all
	// it read, and preErr what the last read said.
	head, back bool
	pre        []byte
	preErr     error
}

const loopBuf = 32 << 10

// sockEvents is what an owned socket is registered for.
const sockEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET

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
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake), Pad: -1}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, err
	}
	l := &evloop{epfd: epfd, wake: wake, buf: make([]byte, loopBuf), stats: st, done: make(chan struct{})}
	if err := unix.SetNonblock(epfd, true); err == nil {
		l.pfd = os.NewFile(uintptr(epfd), "evloop")
	}
	go l.run()
	return l, nil
}

// close ends the loop; no job may be registered (forwarder.close calls it once
// every handler returned). Sockets still open (idle in the pool) stay
// usable for close.
func (l *evloop) close() {
	var one = [8]byte{1}
	unix.Write(l.wake, one[:])
	<-l.done
	if l.pfd != nil {
		l.pfd.Close()
	} else {
		unix.Close(l.epfd)
	}
	unix.Close(l.wake)
}

// own takes c's socket off the runtime's poller and registers it with the
// loop for good; c is closed either way.
func (l *evloop) own(c net.Conn) (upSock, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, errors.New("not a TCP connection")
	}
	fd, err := detach(tc)
	if err != nil {
		c.Close()
		return nil, err
	}
	s := &rawSock{l: l, fd: fd, ch: make(chan struct{}, 1), rready: true, wready: true}
	l.mu.Lock()
	if fd >= len(l.socks) {
		l.socks = append(l.socks, make([]*rawSock, fd+1-len(l.socks)+64)...)
	}
	l.gen++
	if l.gen < 0 {
		l.gen = 0 // -1 tags the wake-up descriptor
	}
	s.gen = l.gen
	l.socks[fd] = s
	l.mu.Unlock()
	// Adding reports what is ready already (writable, at least).
	ev := unix.EpollEvent{Events: sockEvents, Fd: int32(fd), Pad: s.gen}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// Read reads what the socket has, waiting for an arrival when it has
// nothing: end of file once the peer (or shutdown) ended it. It reads
// only when the socket may have something (rready), so the response head
// after a request is read once it came, not tried first.
func (s *rawSock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		s.await(false)
		n, err := rawRead(s.fd, p)
		switch {
		case err == unix.EAGAIN:
			continue // drained: the next arrival marks it
		case err == unix.EINTR:
			s.mark(false)
			continue
		case err != nil:
			s.mark(false) // a next read says so too
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			s.mark(false)
			return 0, io.EOF
		case n == len(p):
			s.mark(false) // maybe more
		default:
			// Short: no more data, but the peer's end of file may have
			// come with it (its edge taken already): then it is read next.
			s.l.mu.Lock()
			if s.hup {
				s.rready = true
			}
			s.l.mu.Unlock()
		}
		return n, nil
	}
}

// Write writes all of p, waiting while the socket's send buffer is full.
func (s *rawSock) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		s.await(true)
		n, err := nbWrite(s.fd, p[written:])
		if n > 0 {
			written += n
		}
		switch {
		case err == unix.EAGAIN:
			continue // full: the next edge marks it
		case err == unix.EINTR:
		case err != nil:
			s.mark(true)
			return written, os.NewSyscallError("write", err)
		}
		s.mark(true)
	}
	return written, nil
}

// writeBufs writes the pieces with one writev while the socket takes them
// whole (the request's head and body, usually in one call).
func (s *rawSock) writeBufs(bufs ...[]byte) error {
	iov := make([][]byte, 0, len(bufs))
	for _, b := range bufs {
		if len(b) > 0 {
			iov = append(iov, b)
		}
	}
	for len(iov) > 0 {
		s.await(true)
		n, err := nbWritev(s.fd, iov)
		for n > 0 && len(iov) > 0 {
			k := min(n, len(iov[0]))
			iov[0], n = iov[0][k:], n-k
			if len(iov[0]) == 0 {
				iov = iov[1:]
			}
		}
		switch {
		case err == unix.EAGAIN:
			continue
		case err == unix.EINTR:
		case err != nil:
			s.mark(true)
			return os.NewSyscallError("writev", err)
		}
		s.mark(true)
	}
	return nil
}

// await returns once the socket may be readable (or writable) and takes
// that mark: the caller tries, and marks it again (mark) unless the try
// found it drained (EAGAIN), or a read shorter than its buffer drained
// it. An edge after the take marks it anew, so a wait after EAGAIN cannot
// miss an arrival.
func (s *rawSock) await(write bool) {
	l := s.l
	l.mu.Lock()
	for write && !s.wready || !write && !s.rready {
		if write {
			s.waitW = true
		} else {
			s.waitR = true
		}
		l.mu.Unlock()
		<-s.ch
		l.mu.Lock()
	}
	if write {
		s.wready = false
	} else {
		s.rready = false
	}
	l.mu.Unlock()
}

// mark says the socket may be readable (or writable) still.
func (s *rawSock) mark(write bool) {
	s.l.mu.Lock()
	if write {
		s.wready = true
	} else {
		s.rready = true
	}
	s.l.mu.Unlock()
}

// notify marks the socket ready for what mask says and wakes an owner
// waiting for it (under l.mu, from the loop).
func (s *rawSock) notify(mask uint32) {
	if mask&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.rready = true
	}
	if mask&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.hup = true
	}
	if mask&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		s.wready = true
	}
	if s.waitR && s.rready || s.waitW && s.wready {
		s.waitR, s.waitW = false, false
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}

func (s *rawSock) shutdown() {
	s.l.mu.Lock()
	if !s.closed {
		unix.Shutdown(s.fd, unix.SHUT_RDWR)
	}
	s.l.mu.Unlock()
}

// close closes the descriptor (which leaves the epoll instance with it);
// under l.mu, so that no shutdown or event lookup sees it reused.
func (s *rawSock) close() {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.fd < len(s.l.socks) && s.l.socks[s.fd] == s {
		s.l.socks[s.fd] = nil
	}
	unix.Close(s.fd)
}

// alive reports whether an idle socket is open and quiet: nothing came
// since it was last drained (no edge: no byte, no end of file), or a peek
// that does not wait finds nothing.
func (s *rawSock) alive() bool {
	s.l.mu.Lock()
	maybe := s.rready
	s.rready = false
	s.l.mu.Unlock()
	if !maybe {
		return true
	}
	var b [1]byte
	_, _, err := unix.Recvfrom(s.fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	if err != unix.EAGAIN {
		s.mark(false)
		return false
	}
	return true
}

// forward hands j's body to the loop and waits until the loop let go of
// it: the body ended (j.ended), or the client socket could not take a
// write at once (j.b.w.pending holds the bytes not yet written). An error
// means the loop could not take it (nothing was read).
func (l *evloop) forward(j *loopJob) error {
	s := j.s
	l.mu.Lock()
	s.job = j
	maybe := s.rready
	s.rready = false
	l.mu.Unlock()
	// Bytes may have come before the job (their edge marked the socket for
	// its owner): modifying the registration reports what is readable, so
	// no arrival is missed. A socket drained since its last edge needs
	// nothing: its next arrival raises an edge, which goes to the job.
	if maybe {
		ev := unix.EpollEvent{Events: sockEvents, Fd: int32(s.fd), Pad: s.gen}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, s.fd, &ev); err != nil {
			l.mu.Lock()
			s.job = nil
			s.rready = true
			l.mu.Unlock()
			return err
		}
	}
	<-j.done
	return nil
}

func (l *evloop) run() {
	defer close(l.done)
	events := make([]unix.EpollEvent, 128)
	jobs := make([]*loopJob, 128)
	var rc syscall.RawConn
	if l.pfd != nil {
		rc, _ = l.pfd.SyscallConn()
	}
	for rc != nil {
		// What is ready now, served inside the callback; when nothing is,
		// wait on the runtime's poller for the epoll instance to become
		// readable, as any goroutine waits for a socket, rather than in a
		// system call that holds a thread (and makes the runtime hand its
		// P off). The callback runs first, always: RawConn.Read forgets a
		// readiness that came before it was called (so the loop stays in
		// one Read); after a wait it runs again. A batch shorter than
		// events drained the instance: a later arrival makes it readable
		// anew, which the wait sees even if it came during the batch, so
		// no empty try is needed before waiting.
		stop := false
		var werr error
		rerr := rc.Read(func(fd uintptr) bool {
			for {
				n, err := epollPoll(int(fd), events)
				switch {
				case err == unix.EINTR:
					continue
				case err != nil:
					werr = err
					return true
				case n == 0:
					return false
				}
				if stop = l.dispatch(events[:n], jobs); stop {
					return true
				}
				if n < len(events) {
					return false
				}
			}
		})
		switch {
		case stop:
			return
		case werr != nil:
			runtime.Gosched()
		case rerr != nil:
			rc = nil // the runtime's poller would not wait for it: block from now on
		}
	}
	for {
		n, err := unix.EpollWait(l.epfd, events, -1)
		if err != nil {
			if !errors.Is(err, unix.EINTR) {
				runtime.Gosched()
			}
			continue
		}
		if l.dispatch(events[:n], jobs) {
			return
		}
	}
}

// dispatch serves a batch of events (jobs is scratch space as long); true
// means close asked the loop to stop.
func (l *evloop) dispatch(events []unix.EpollEvent, jobs []*loopJob) (stop bool) {
	l.mu.Lock()
	for i := range events {
		jobs[i] = nil
		fd, gen := int(events[i].Fd), events[i].Pad
		if gen < 0 {
			stop = true
			continue
		}
		if fd >= len(l.socks) {
			continue
		}
		s := l.socks[fd]
		if s == nil || s.gen != gen {
			continue // closed since (its descriptor may be another's now)
		}
		if s.job != nil {
			jobs[i] = s.job
		} else {
			s.notify(events[i].Events)
		}
	}
	l.mu.Unlock()
	if stop {
		return true
	}
	for i := range events {
		if j := jobs[i]; j != nil {
			l.serve(j, events[i].Events)
			jobs[i] = nil
		}
	}
	for i, j := range l.released {
		close(j.done)
		l.released[i] = nil
	}
	l.released = l.released[:0]
	return false
}

// serve reads what arrived for j and forwards it; when the body is over or
// a write is pending it lets go of j.
func (l *evloop) serve(j *loopJob, mask uint32) {
	hup := mask&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
	fd := j.s.fd
	for {
		n, err := rawRead(fd, l.buf)
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
		data := l.buf[:n]
		if j.head {
			var ok bool
			if data, ok = j.readHead(data, t, err); !ok {
				j.back = true
				l.release(j, true, hup) // the goroutine reads on from here
				return
			}
			if j.head { // more of the head to come
				if n < len(l.buf) && !hup {
					return
				}
				continue
			}
		}
		ok := j.b.process(data, t, err)
		if j.b.w.flushHead() != nil {
			j.b.res.ClientGone = true // the head alone: nothing else to write came with it
		}
		if !ok {
			j.ended = true
			l.release(j, n == len(l.buf) || hup, hup)
			return
		}
		if len(j.b.w.pending) > 0 {
			l.release(j, true, hup)
			return
		}
		if n < len(l.buf) && !hup {
			return // drained: the next arrival raises a new edge
		}
	}
}

// release lets go of j, handing it back to its goroutine once the batch
// is served (evloop.released); more says the socket may hold
// bytes still (the last read filled the buffer, the peer hung up, or the
// job stopped reading), for its owner's next read or check, and hup that
// an event said the peer hung up.
func (l *evloop) release(j *loopJob, more, hup bool) {
	l.mu.Lock()
	j.s.job = nil
	if more {
		j.s.rready = true
	}
	if hup {
		j.s.hup = true
	}
	l.mu.Unlock()
	l.released = append(l.released, j)
}

// readHead takes one read of j's response head (data, stamped t; err is
// the read's error) and returns the body bytes that came after the head;
// false hands the head back to the goroutine: it is not plain
// (parsePlainHead), or the connection ended or failed before it did (a
// stale connection's end of file is the goroutine's to retry). A plain
// head is written to the client with the first body bytes, or alone when
// none came with it (clientWriter.held).
func (j *loopJob) readHead(data []byte, t int64, err error) ([]byte, bool) {
	buf := data
	if len(j.pre) > 0 {
		j.pre = append(j.pre, data...)
		buf = j.pre
	}
	if err != nil {
		j.pre, j.preErr = append(j.pre[:0:0], buf...), err
		return nil, false
	}
	b, w := j.b, j.b.w
	h, out, n, st := parsePlainHead(buf, w.cc.hout[:0])
	switch st {
	case headMore:
		if len(j.pre) == 0 {
			j.pre = append(make([]byte, 0, 2*len(data)+1024), data...)
		}
		return nil, true
	case headOther:
		j.pre = append(j.pre[:0:0], buf...)
		return nil, false
	}
	j.head = false
	b.t, b.res.Status = t, h.status
	length := b.frame(false, h.status, h.chunked, h.length, h.close)
	if b.x != nil {
		b.x.Response(Response{Status: h.status, Stamp: t, EventStream: h.sse, Loop: true})
	}
	w.held = w.endHead(out, h.status, length, h.chunked, "")
	w.cc.hout, w.wrote = w.held, true
	b.pass = h.chunked && w.mode == bodyRaw && !w.closeAfter
	if b.complete && len(buf) > n {
		b.reuse = false // bytes after a body that ended with its head
	}
	return buf[n:], true
}

// headOnLoop hands the response to s's loop from its head on (the request
// is sent): true when the loop parsed the head and forwarded the response
// (the rest of the body is forwarded here, through buf, when a slow
// client made the loop let go of it); false when the goroutine is to read
// the head: uc.pre (and uc.preErr) hold what the loop read of it, or the
// loop could not take it.
func (b *rawBody) headOnLoop(s *rawSock, uc *upConn, buf []byte) bool {
	j := &loopJob{b: b, s: s, head: true, done: make(chan struct{})}
	if started, cut := b.onLoop(j); !started || cut {
		return false // the goroutine reads the head (a cut client: its watcher says so)
	}
	st := s.l.stats
	if j.back {
		st.headBacks.Add(1)
		uc.pre, uc.preErr = j.pre, j.preErr
		return false
	}
	st.heads.Add(1)
	if !b.afterLoop(j) {
		b.loopBuffered(uc, buf)
	}
	return true
}

// viaLoop forwards the rest of b's body on s's loop and reports whether
// the body is over. False when its goroutine is to forward the rest: the
// client socket could not take the loop's write at once (a slow client:
// the pending bytes are written by then), or the loop could not take the
// body.
func (b *rawBody) viaLoop(s *rawSock) bool {
	j := &loopJob{b: b, s: s, done: make(chan struct{})}
	started, cut := b.onLoop(j)
	switch {
	case cut:
		b.res.ClientGone, b.reuse = true, false
		return true
	case !started:
		return false
	}
	return b.afterLoop(j)
}

// onLoop runs j on its socket's loop, holding the client socket (inside
// its RawConn's write callback) while the loop writes to its descriptor,
// until the loop lets go of j; started is false when the loop could not
// take j, and cut when the client connection was closed before.
func (b *rawBody) onLoop(j *loopJob) (started, cut bool) {
	cs, ok := b.w.cc.c.(syscall.Conn)
	if !ok {
		return false, false
	}
	crc, err := cs.SyscallConn()
	if err != nil {
		return false, false
	}
	werr := crc.Write(func(cfd uintptr) bool {
		b.w.raw, b.w.rawFd = true, int(cfd)
		started = j.s.l.forward(j) == nil
		b.w.raw = false
		return true
	})
	return started, werr != nil
}

// afterLoop finishes what the loop forwarded of b's body (j) and reports
// whether the body is over; false when the goroutine is to forward the
// rest (a slow client: what the loop could not write is written by then).
func (b *rawBody) afterLoop(j *loopJob) bool {
	st := j.s.l.stats
	st.bodies.Add(1)
	over := j.ended || b.complete || b.res.ClientGone
	if over && !(b.complete && b.reuse) {
		b.reuse = false
	}
	// What the client socket did not take, in every case: the body's end
	// may be among it.
	if len(b.w.pending) > 0 && !b.res.ClientGone {
		st.handbacks.Add(1)
		p := b.w.pending
		b.w.pending = nil
		if _, err := b.w.cc.c.Write(p); err != nil {
			b.w.broken = true
			b.w.gone.Store(true)
			b.res.ClientGone = true
		}
	}
	return over || b.res.ClientGone
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

// rawWrite writes p to a non-blocking socket as far as it takes it at
// once: n bytes, and EAGAIN when it took fewer.
func rawWrite(fd int, p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := nbWrite(fd, p[written:])
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

// rawRead and nbWrite are read(2) and write(2) on a non-blocking socket,
// the loop's per-event calls (and the request's on an owned socket): they
// never wait, so they are made without
// telling the scheduler (which would hand the loop's P off to another
// thread if one took long, and costs an enter and an exit per call).
func rawRead(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// epollPoll is epoll_wait(2) with a zero timeout: what the instance has
// ready now, without waiting, so, as rawRead, made without telling the
// scheduler. epoll_pwait with no signal mask is epoll_wait, and is there
// on every Linux architecture.
func epollPoll(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// nbWritev is writev(2) on a non-blocking socket, as nbWrite.
func nbWritev(fd int, bufs [][]byte) (int, error) {
	var iov [4]unix.Iovec
	if len(bufs) > len(iov) {
		return unix.Writev(fd, bufs)
	}
	for i, b := range bufs {
		iov[i].Base = unsafe.SliceData(b)
		iov[i].SetLen(len(b))
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(bufs)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

func nbWrite(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
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
