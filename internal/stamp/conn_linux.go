//go:build linux

package stamp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/clock"
)

func kernelStampsUnsupported() string { return "" }

// clientCPUs is how many CPUs this process may run on (its affinity
// mask), 0 when that cannot be read.
func clientCPUs() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 0
	}
	return set.Count()
}

// stampFlags ask for software receive stamps and for them to be reported.
const stampFlags = unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE

// Conn is a TCP connection read with recvmsg so that every read brings
// the kernel's receive stamp of its last segment (SCM_TIMESTAMPING, in
// CLOCK_REALTIME), which it keeps, converted to clock.Mono, as Last. With
// split (kernel-offset), a read that brings more than one event is
// handed out one event at a time: Read returns the bytes up to the first
// event end and keeps the rest (pend) for the next Reads, which need no
// syscall; each piece is stamped with the earlier of the read's kernel
// stamp and the observer's first sight of the piece's last byte. The
// socket is out of Go's netpoller: its reads wait for the process's
// poller (poll_linux.go), which batches the wake-ups of many streams;
// deadlines and Close work as on a net.Conn.
//
// One reader at a time (the HTTP client's, TLS's under it, or the
// poller's while pushed): the scratch fields belong to the read in
// progress. Nothing is allocated per read once pend has grown to the
// largest remainder.
type Conn struct {
	*pollConn // the socket, out of Go's netpoller (poll_linux.go)
	st        *Source
	split     bool
	last      atomic.Int64 // Mono ns of the last read's stamp
	obs       obsReg       // split: the registration with st.obs, obs.s nil none
	tap       *tap         // split: the packet tap recording flow, nil none
	flow      *flow
	closed    atomic.Bool // Close was called
	push      pushState   // push mode (push_linux.go)
	pushing   atomic.Bool // a push is set: the poller serves the edges
	inBatch   bool        // in the poller's batch of reads (its goroutine only)

	// split: bytes received but not yet returned, their kernel stamp
	// (Mono) and the connection offset of the next byte Read returns.
	pend    []byte
	pendBuf []byte
	pendNs  int64
	off     int64

	// The recvmsg in progress.
	p      []byte
	n      int
	err    error
	hdr    unix.Msghdr
	iov    unix.Iovec
	oob    [128]byte
	readFn func(fd uintptr) (done, full bool)
}

// newConn enables receive stamps on nc and wraps it; an error means the
// socket refused them (the caller keeps nc as it is).
func newConn(nc net.Conn, split bool, st *Source) (*Conn, error) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil, fmt.Errorf("a %T is not a TCP connection", nc)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, stampFlags)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("setsockopt SO_TIMESTAMPING: %w", serr)
	}
	pc, err := newPollConn(tc)
	if err != nil {
		return nil, err
	}
	c := &Conn{pollConn: pc, st: st, split: split}
	c.readFn = c.read
	c.last.Store(clock.Mono())
	pc.owner.Store(c)
	if split && st.tap != nil {
		if c.flow = st.tap.register(tc.LocalAddr(), tc.RemoteAddr()); c.flow != nil {
			c.tap = st.tap
		} else {
			st.tapMisses.Add(1)
		}
	}
	if split && st.obs != nil && st.offNs.Load() == 0 {
		var aerr error
		c.obs, aerr = st.obs.add(pc.fd)
		if aerr != nil {
			c.obs = obsReg{}
			if st.offNs.Load() == 0 { // not switched off meanwhile
				st.observeErrs.Add(1)
			}
		}
	}
	return c, nil
}

// Close leaves the observer before the socket closes.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return c.pollConn.Close() // its own error for a second Close
	}
	if c.obs.s != nil {
		c.obs.o.remove(c.obs)
	}
	if c.flow != nil {
		c.tap.unregister(c.flow)
	}
	return c.pollConn.Close()
}

// Last is the stamp of the bytes the last Read returned, in clock.Mono
// ns (the run's monotonic clock); before any read, the dial's time.
func (c *Conn) Last() int64 { return c.last.Load() }

func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.shut.Load() {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: net.ErrClosed}
	}
	if len(c.pend) > 0 {
		n := copy(p, c.pend[:eventEnd(c.pend)])
		c.pend = c.pend[n:]
		c.deliver(n, c.pendNs)
		return n, nil
	}
	c.p, c.n, c.err = p, 0, nil
	err := c.rawRead(c.readFn)
	c.p = nil
	if err == nil {
		err = c.err
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: wrapSyscall(err)}
	}
	n := c.n
	if n == 0 {
		return 0, io.EOF
	}
	stamp := c.readStamp()
	if !c.split {
		c.setLast(stamp)
		return n, nil
	}
	if c.obs.s != nil {
		c.obs.s.consumed.Add(int64(n))
	}
	if cut := eventEnd(p[:n]); cut < n {
		c.pendBuf = append(c.pendBuf[:0], p[cut:n]...)
		c.pend, c.pendNs, n = c.pendBuf, stamp, cut
	}
	c.deliver(n, stamp)
	return n, nil
}

// deliver stamps the n bytes Read returns from offset c.off on (split
// mode): the kernel stamp of the recvmsg that brought them, or the
// observer's first sight of their last byte when that is earlier.
func (c *Conn) deliver(n int, stamp int64) {
	c.off += int64(n)
	if len(c.pend) > 0 {
		c.st.splitReads.Add(1)
	}
	c.setLast(c.observed(stamp))
}

// observed is stamp, or the observer's first sight of the byte before
// offset c.off when that is earlier.
func (c *Conn) observed(stamp int64) int64 {
	var real int64
	var ok bool
	switch {
	case c.flow != nil:
		real, ok = c.tap.firstAt(c.flow, c.off)
	case c.obs.s != nil:
		real, ok = c.obs.s.firstAt(c.obs.gen, c.off)
	}
	if ok {
		if at := c.st.toMono(real); at < stamp {
			c.st.observedReads.Add(1)
			return at
		}
	}
	return stamp
}

// setLast keeps stamp as the last read's. Segments arrive in order; only
// a re-measured offset could step a stamp back by its width.
func (c *Conn) setLast(stamp int64) {
	c.last.Store(max(stamp, c.last.Load()))
}

// wrapSyscall makes a raw errno look as net's own reads report it.
func wrapSyscall(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return os.NewSyscallError("recvmsg", errno)
	}
	return err
}

// read is rawRead's callback: one recvmsg with the control buffer; not
// done asks to wait for the next edge, full says bytes may be left.
func (c *Conn) read(fd uintptr) (done, full bool) {
	n, err := recvmsg(fd, &c.hdr, &c.iov, c.p, c.oob[:], unix.MSG_DONTWAIT)
	switch {
	case err == unix.EAGAIN:
		return false, false
	case err == unix.EINTR:
		c.rready.Store(true) // try again at once
		return false, false
	case err != nil:
		c.err = err
		return true, false
	}
	c.n = n
	return true, n == len(c.p)
}

// recvmsg is recvmsg(2) of fd into p with the control buffer oob, through
// the caller's scratch header and iovec.
func recvmsg(fd uintptr, hdr *unix.Msghdr, iov *unix.Iovec, p, oob []byte, flags int) (int, error) {
	setMsghdr(hdr, iov, p, oob)
	// MSG_DONTWAIT: it never blocks, so the runtime need not be told.
	n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(hdr)), uintptr(flags))
	iov.Base = nil
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// setMsghdr points hdr at p, through iov, and at the control buffer oob.
func setMsghdr(hdr *unix.Msghdr, iov *unix.Iovec, p, oob []byte) {
	iov.Base = &p[0]
	iov.SetLen(len(p))
	*hdr = unix.Msghdr{Iov: iov}
	hdr.SetIovlen(1)
	hdr.Control = &oob[0]
	hdr.SetControllen(len(oob))
}

// prepRecvmsg sets c's header for a recvmsg into p made elsewhere (a
// batch through the poller's ring); the maker clears c.iov.Base after.
func (c *Conn) prepRecvmsg(p []byte) { setMsghdr(&c.hdr, &c.iov, p, c.oob[:]) }

// stamp finds the software receive stamp in the last recvmsg's control data.
func (c *Conn) stamp() (int64, bool) { return rxStamp(&c.hdr, c.oob[:]) }

// rxStamp finds the software receive stamp (the first of
// SCM_TIMESTAMPING's three timespecs) in the control data of hdr, whose
// buffer is oob.
func rxStamp(hdr *unix.Msghdr, oob []byte) (int64, bool) {
	buf := oob[:min(int(hdr.Controllen), len(oob))]
	hl := unix.CmsgLen(0)
	for len(buf) >= hl {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&buf[0]))
		l := int(h.Len)
		if l < hl || l > len(buf) {
			return 0, false
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPING && l >= hl+int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&buf[hl]))
			if ts.Sec == 0 && ts.Nsec == 0 {
				return 0, false
			}
			return ts.Nano(), true
		}
		buf = buf[min(unix.CmsgSpace(l-hl), len(buf)):]
	}
	return 0, false
}
