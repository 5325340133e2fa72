//go:build linux

package replay

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

	"github.com/tracekit/tracekit/clock"
)

func kernelStampsUnsupported() string { return "" }

// stampFlags ask for software receive stamps and for them to be reported.
const stampFlags = unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE

// rxConn is a TCP connection read with recvmsg so that every read brings
// the kernel's receive stamp of its last segment (SCM_TIMESTAMPING, in
// CLOCK_REALTIME), which it keeps, converted to Mono, as lastNs. With
// split, each read ends at the first event end among the queued bytes
// (see StampKernelOffset). Reads go through syscall.RawConn, so the
// netpoller waits for data and deadlines apply as on the plain conn.
//
// One reader at a time (fasthttp's, or TLS's under it): the scratch
// fields belong to the Read in progress. Nothing is allocated per read.
type rxConn struct {
	*net.TCPConn
	raw   syscall.RawConn
	st    *stamper
	split bool
	last  atomic.Int64 // Mono ns of the last read's stamp
	arr   arrivals     // split: what the observer saw arrive
	obsID uint64       // split: registration with st.obs, 0 none

	// The read in progress.
	p      []byte
	n      int
	err    error
	hdr    unix.Msghdr
	iov    unix.Iovec
	oob    [128]byte
	readFn func(fd uintptr) bool
}

// newRxConn enables receive stamps on nc and wraps it; an error means the
// socket refused them (the caller keeps nc as it is).
func newRxConn(nc net.Conn, split bool, st *stamper) (*rxConn, error) {
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
	c := &rxConn{TCPConn: tc, raw: raw, st: st, split: split}
	c.readFn = c.read
	c.last.Store(clock.Mono())
	if split && st.obs != nil {
		var aerr error
		raw.Control(func(fd uintptr) { c.obsID, aerr = st.obs.add(int(fd), &c.arr) })
		if aerr != nil {
			c.obsID = 0
			st.observeErrs.Add(1)
		}
	}
	return c, nil
}

// Close leaves the observer before the socket closes.
func (c *rxConn) Close() error {
	if c.obsID != 0 {
		c.st.obs.remove(c.obsID)
	}
	return c.TCPConn.Close()
}

// lastNs is the Mono time of the last read's stamp.
func (c *rxConn) lastNs() int64 { return c.last.Load() }

func (c *rxConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.p, c.n, c.err = p, 0, nil
	err := c.raw.Read(c.readFn)
	c.p = nil
	if err == nil {
		err = c.err
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: wrapSyscall(err)}
	}
	if c.n == 0 {
		return 0, io.EOF
	}
	return c.n, nil
}

// wrapSyscall makes a raw errno look as net's own reads report it.
func wrapSyscall(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return os.NewSyscallError("recvmsg", errno)
	}
	return err
}

// read is the RawConn callback: false asks the netpoller to wait.
func (c *rxConn) read(fd uintptr) bool {
	p := c.p
	if c.split {
		n, err := c.recv(fd, p, false, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return false
		case err != nil:
			c.err = err
			return true
		case n == 0:
			c.n = 0
			return true
		}
		if cut := eventEnd(p[:n]); cut < n {
			p = p[:cut]
			c.st.splitReads.Add(1)
		}
	}
	n, err := c.recv(fd, p, true, unix.MSG_DONTWAIT)
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return false
	case err != nil:
		c.err = err
		return true
	}
	c.n = n
	if n == 0 {
		return true
	}
	var stamp int64
	if real, ok := c.stamp(); ok {
		stamp = c.st.toMono(real)
		c.st.kernelReads.Add(1)
	} else {
		stamp = clock.Mono()
		c.st.fallbackReads.Add(1)
	}
	if c.split {
		end := c.arr.consumed.Add(int64(n))
		if c.obsID != 0 {
			if at, ok := c.arr.firstAt(end); ok && at < stamp {
				stamp = at
				c.st.observedReads.Add(1)
			}
		}
	}
	// Segments arrive in order; only a re-measured offset could step a
	// stamp back by its width.
	stamp = max(stamp, c.last.Load())
	c.last.Store(stamp)
	return true
}

// recv is recvmsg(2) into p, with the control buffer when oob.
func (c *rxConn) recv(fd uintptr, p []byte, oob bool, flags int) (int, error) {
	c.iov.Base = &p[0]
	c.iov.SetLen(len(p))
	c.hdr = unix.Msghdr{Iov: &c.iov}
	c.hdr.SetIovlen(1)
	if oob {
		c.hdr.Control = &c.oob[0]
		c.hdr.SetControllen(len(c.oob))
	}
	n, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&c.hdr)), uintptr(flags))
	c.iov.Base = nil
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// stamp finds the software receive stamp (the first of
// SCM_TIMESTAMPING's three timespecs) in the last recv's control data.
func (c *rxConn) stamp() (int64, bool) {
	buf := c.oob[:min(int(c.hdr.Controllen), len(c.oob))]
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
