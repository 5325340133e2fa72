package h1proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// upstreamPool keeps idle HTTP/1.1 keep-alive connections to a plain-http
// upstream for the proxy's own client (rawForward). It holds no goroutine:
// a connection the server closed while idle is found when it is taken
// (alive peeks at the socket without blocking).
type upstreamPool struct {
	addr   string
	dialer net.Dialer
	max    int
	// own takes a new connection over (an evloop's raw socket on Linux);
	// nil, or an error, keeps it a net.Conn (netSock).
	own func(net.Conn) (upSock, error)

	mu     sync.Mutex
	idle   []*upConn // most recently used last
	closed bool
}

// upConn is one connection to the upstream and its read buffer.
type upConn struct {
	s      upSock
	br     *bufio.Reader // reads pre, then preErr, then s (upReader)
	idleAt time.Time
	reused bool // taken from the pool (it may have been closed meanwhile)
	// pre is what an evloop read of a response head it handed back to the
	// goroutine (rawBody.headOnLoop), and preErr the error its last read
	// said: read first.
	pre    []byte
	preErr error
	// headLeft bounds what a response head may take (readResponseHead).
	headLeft headBudget
}

// maxResponseHead bounds a response head net/http reads: an upstream that
// never ends its head gets a 502, not the proxy's memory.
const maxResponseHead = 1 << 20

var errResponseHeadTooLarge = fmt.Errorf("response head larger than %d bytes", maxResponseHead)

// upReader is what an upConn's bufio.Reader reads.
type upReader struct{ uc *upConn }

func (r upReader) Read(p []byte) (int, error) {
	uc := r.uc
	if len(uc.pre) > 0 { // within the head's bound: the loop's own was smaller
		n := copy(p, uc.pre)
		uc.pre = uc.pre[n:]
		return n, nil
	}
	if err := uc.preErr; err != nil {
		uc.preErr = nil
		return 0, err
	}
	return uc.headLeft.read(uc.s, p, errResponseHeadTooLarge)
}

// upSock is an upstream connection as rawForward uses it: a net.Conn
// (netSock), or on Linux a socket an evloop owns for its whole life
// (rawSock: never on the runtime's poller, so a body goes to the loop and
// comes back without the socket being moved). Reads and writes wait until
// they can be done; only the connection's owner (the request's goroutine,
// or the pool) calls them.
type upSock interface {
	io.Reader
	io.Writer
	// writeBufs writes the pieces in order, as one gathered write where it
	// can.
	writeBufs(bufs ...[]byte) error
	// shutdown shuts the connection down both ways without closing it
	// (the watcher's abort, from another goroutine): whoever reads it
	// reads end of file, and the upstream sees the request end. After
	// close it does nothing.
	shutdown()
	close()
	// alive reports whether an idle connection is still open and quiet.
	alive() bool
}

// netSock is an upstream connection through the runtime's poller.
type netSock struct{ net.Conn }

var _ upSock = netSock{}

func (s netSock) writeBufs(bufs ...[]byte) error {
	b := net.Buffers(bufs)
	_, err := b.WriteTo(s.Conn)
	return err
}

func (s netSock) shutdown()   { shutdownConn(s.Conn)() }
func (s netSock) close()      { s.Conn.Close() }
func (s netSock) alive() bool { return alive(s.Conn) }

// upstreamIdleTimeout closes connections idle longer than this.
const upstreamIdleTimeout = 90 * time.Second

func newUpstreamPool(addr string, max int) *upstreamPool {
	return &upstreamPool{addr: addr, max: max, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
}

// get returns an idle live connection, or dials a new one.
func (u *upstreamPool) get() (*upConn, error) {
	now := time.Now()
	for {
		u.mu.Lock()
		n := len(u.idle)
		if n == 0 {
			u.mu.Unlock()
			break
		}
		uc := u.idle[n-1]
		u.idle[n-1] = nil
		u.idle = u.idle[:n-1]
		u.mu.Unlock()
		if now.Sub(uc.idleAt) < upstreamIdleTimeout && uc.br.Buffered() == 0 && len(uc.pre) == 0 && uc.preErr == nil && uc.s.alive() {
			uc.reused = true
			return uc, nil
		}
		uc.s.close()
	}
	c, err := u.dialer.Dial("tcp", u.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	var s upSock = netSock{c}
	if u.own != nil {
		if rs, err := u.own(c); err == nil {
			s = rs
		}
	}
	uc := &upConn{s: s}
	uc.br = bufio.NewReaderSize(upReader{uc}, 8<<10)
	return uc, nil
}

// put returns a connection whose response ended cleanly to the pool.
func (u *upstreamPool) put(uc *upConn) {
	uc.idleAt = time.Now()
	u.mu.Lock()
	if u.closed || len(u.idle) >= u.max {
		u.mu.Unlock()
		uc.s.close()
		return
	}
	u.idle = append(u.idle, uc)
	u.mu.Unlock()
}

// close closes the idle connections; later puts close theirs.
func (u *upstreamPool) close() {
	u.mu.Lock()
	idle := u.idle
	u.idle, u.closed = nil, true
	u.mu.Unlock()
	for _, uc := range idle {
		uc.s.close()
	}
}

// alive reports whether an idle connection is still open and quiet: a
// non-blocking peek sees nothing to read (EAGAIN). End of file means the
// server closed it; unexpected bytes mean it cannot be trusted.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	rerr := rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = errors.Is(err, syscall.EAGAIN)
		return true // never wait
	})
	return rerr == nil && ok
}
