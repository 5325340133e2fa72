package replay

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/stamp"
)

// errRunCanceled is what a connection's Read returns once the run is
// canceled: every in-flight stream ends at once.
var errRunCanceled = errors.New("the run was canceled")

// conn wraps every connection a target's client dials (above TLS, so it
// sees the plain HTTP exchange), with its read buffer. It keeps:
//   - wroteNs: when a request's bytes were last written (its actual send time),
//     and writeStartNs when its first write began;
//   - idle: a per-read idle timeout. The request's read deadline covers the
//     whole streamed body, so before each Read (response headers included)
//     we keep the deadline at min(request deadline, now + idle to
//     idle*9/8), moving it only when it falls out of that range
//     (idleDeadline);
//   - cancel: the run can interrupt every blocked Read;
//   - stamps: in a kernel stamp mode the TCP connection under it (and
//     under TLS) is a stamp.Conn, whose reads carry the kernel's receive
//     stamps; stampFn reads the last one, run-relative, for the body's
//     parser (runState.bodyClock, stamp.go);
//   - reuse: the request goroutine learns whether a failed request went
//     out on a reused connection and got no response byte: the signature
//     of a keep-alive connection the server had closed, which replay sends
//     again on a fresh connection.
//
// A conn is used by one request at a time (the pool, h1.go, hands it
// over under a mutex); the atomics keep the race detector and Close
// honest.
type conn struct {
	net.Conn
	set *connSet

	wroteNs atomic.Int64 // clock.Mono() after the last Write returned
	// writeStartNs is clock.Mono() before the first Write of the current
	// request: with wroteNs, how long a large body took to hand over.
	writeStartNs atomic.Int64
	readNs       atomic.Int64 // clock.Mono() after the last Read that returned bytes (or the dial)
	reqDeadline  atomic.Int64 // unix ns of the request's read deadline; 0: none
	readDl       atomic.Int64 // unix ns of the read deadline set on Conn now; 0: none

	requests atomic.Int32 // requests started on this connection
	writing  atomic.Bool  // the current request is being written or awaits its first response byte
	gotByte  atomic.Bool  // the current request received a response byte

	rx      *stamp.Conn  // the stamping TCP conn beneath, nil in goroutine mode
	stampFn func() int64 // rx's last stamp minus the run start, made once per conn

	br *bufio.Reader // the connection's read buffer (h1Client.dialConn)
}

func (c *conn) Write(p []byte) (int, error) {
	if !c.writing.Load() {
		// The first write of a request: HTTP/1.1 without pipelining sends
		// a request only after the previous response was read.
		c.requests.Add(1)
		c.writing.Store(true)
		c.gotByte.Store(false)
		c.writeStartNs.Store(clock.Mono())
	}
	n, err := c.Conn.Write(p)
	c.wroteNs.Store(clock.Mono())
	return n, err
}

func (c *conn) Read(p []byte) (int, error) {
	if c.set.canceled.Load() {
		return 0, errRunCanceled
	}
	if idle := c.set.idle; idle > 0 {
		if err := c.idleDeadline(idle); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.readNs.Store(clock.Mono())
		if c.writing.Load() {
			c.writing.Store(false)
			c.gotByte.Store(true)
		}
	}
	if err != nil && c.set.canceled.Load() {
		err = errRunCanceled
	}
	return n, err
}

// reusedWithoutAnswer reports whether the request that last used c went
// out on a connection that had served a request before and has not
// received a byte of its response.
func (c *conn) reusedWithoutAnswer() bool {
	return c.requests.Load() > 1 && !c.gotByte.Load()
}

// idleDeadline sets the read deadline to at least now + idle, capped by
// the request's own deadline. Moving a deadline is a timer change in the
// runtime, so it is moved only when needed: when the one set would fire
// less than idle from now, it is set idle + idle/8 ahead, and the next
// idle/8 of reads (most events of a stream) leave it alone. A silent
// stream thus times out between idle and idle*9/8 after its last read.
func (c *conn) idleDeadline(idle time.Duration) error {
	now := time.Now().UnixNano()
	lo, hi := now+int64(idle), now+int64(idle+idle/8)
	set := c.readDl.Load()
	d := hi
	if rd := c.reqDeadline.Load(); rd != 0 && rd <= hi {
		d, lo = rd, min(lo, rd)
	}
	if set >= lo && set <= d && set != 0 {
		return nil // fires no earlier than needed and no later than allowed
	}
	c.readDl.Store(d)
	return c.Conn.SetReadDeadline(time.Unix(0, d))
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.storeDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) SetDeadline(t time.Time) error {
	c.storeDeadline(t)
	return c.Conn.SetDeadline(t)
}

// storeDeadline keeps t as the request's deadline and as the read
// deadline now set on the conn beneath (0: none).
func (c *conn) storeDeadline(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	c.reqDeadline.Store(ns)
	c.readDl.Store(ns)
}

// pastRequestDeadline reports whether the request's own deadline (not the
// idle one) has passed: it tells a timeout from an idle timeout.
func (c *conn) pastRequestDeadline() bool {
	rd := c.reqDeadline.Load()
	return rd != 0 && time.Now().UnixNano() >= rd
}

func (c *conn) Close() error {
	c.set.remove(c)
	return c.Conn.Close()
}

// connSet dials and tracks the live connections of a run so cancel can
// reach them. It is touched on dial and close only, never per request.
type connSet struct {
	dialTimeout time.Duration
	idle        time.Duration // Config.IdleTimeout: per read, 0 none
	tls         *tls.Config   // for https:// targets; nil for http://
	stamp       *stamp.Source // the run's stamp mode and counters
	start       atomic.Int64  // the run's start (Mono): stamps are run-relative
	canceled    atomic.Bool
	canceledCh  chan struct{} // closed by cancel: for the waits no deadline ends
	perSource   int           // live connections per loopback source address (srcaddr.go)
	mu          sync.Mutex
	conns       map[*conn]struct{}
}

func newConnSet(cfg *Config) *connSet {
	return &connSet{
		dialTimeout: cfg.DialTimeout, idle: cfg.IdleTimeout,
		conns: make(map[*conn]struct{}), canceledCh: make(chan struct{}), stamp: newStampSource(cfg), perSource: portsPerSource(),
	}
}

// dialer returns the Dial of one target's client: TCP with the run's dial
// timeout, with receive stamps in a kernel stamp mode (a socket that
// refuses them is read as before, counted in the run's stamp note), then
// TLS when tlsCfg is not nil (so that the wrapper sees plain HTTP),
// wrapped.
func (s *connSet) dialer(tlsCfg *tls.Config) func(addr string) (net.Conn, error) {
	return func(addr string) (net.Conn, error) {
		if s.canceled.Load() {
			return nil, errRunCanceled
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout)
		defer cancel()
		s.mu.Lock()
		live := len(s.conns)
		s.mu.Unlock()
		var d net.Dialer
		if src := sourceFor(addr, live, s.perSource); src != nil {
			d.LocalAddr, d.Control = src, bindNoPort
		}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		rx := s.stamp.Wrap(nc, tlsCfg != nil)
		if rx != nil {
			nc = rx
		}
		if tlsCfg != nil {
			tc := tls.Client(nc, tlsCfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				nc.Close()
				return nil, err
			}
			nc = tc
		}
		c := &conn{Conn: nc, set: s, rx: rx}
		if rx != nil {
			// Never before the request's recorded send: that is read
			// after Write returned and can be later than the answer's
			// arrival when the goroutine waited between the two.
			c.stampFn = func() int64 { return max(rx.Last(), c.wroteNs.Load()) - s.start.Load() }
		}
		c.readNs.Store(clock.Mono())
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		if s.canceled.Load() { // canceled while dialing
			c.Close()
			return nil, errRunCanceled
		}
		return c, nil
	}
}

func (s *connSet) remove(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// cancel makes every blocked and future Read fail with errRunCanceled.
func (s *connSet) cancel() {
	if !s.canceled.Swap(true) {
		close(s.canceledCh)
	}
	past := time.Unix(1, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Conn.SetDeadline(past)
	}
}
