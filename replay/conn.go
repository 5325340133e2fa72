package replay

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/clock"
)

// errRunCanceled is what a connection's Read returns once the run is
// canceled: every in-flight stream ends at once.
var errRunCanceled = errors.New("the run was canceled")

// conn wraps every connection fasthttp dials. It exists for three reasons
// fasthttp gives no hook for:
//   - wroteNs: when a request's bytes were last written (its actual send time);
//   - idle: a per-event idle timeout. fasthttp's own read deadline covers the
//     whole streamed body, so before each Read we set the deadline to
//     min(request deadline, now + idle);
//   - cancel: the run can interrupt every blocked Read.
//
// The request goroutine finds its conn after Do returns through
// Response.LocalAddr, which returns the conn's own addr (connAddr).
type conn struct {
	net.Conn
	set  *connSet
	addr connAddr

	wroteNs     atomic.Int64 // clock.Mono() after the last Write returned
	idle        atomic.Int64 // ns between reads allowed; 0: off
	reqDeadline atomic.Int64 // unix ns of the read deadline fasthttp set; 0: none
}

// connAddr is the conn's local address with a way back to the conn.
type connAddr struct {
	net.Addr
	c *conn
}

func (c *conn) LocalAddr() net.Addr { return &c.addr }

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.wroteNs.Store(clock.Mono())
	return n, err
}

func (c *conn) Read(p []byte) (int, error) {
	if c.set.canceled.Load() {
		return 0, errRunCanceled
	}
	if idle := c.idle.Load(); idle > 0 {
		d := time.Now().UnixNano() + idle
		if rd := c.reqDeadline.Load(); rd != 0 && rd < d {
			d = rd
		}
		if err := c.Conn.SetReadDeadline(time.Unix(0, d)); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.set.canceled.Load() {
		err = errRunCanceled
	}
	return n, err
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.storeDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) SetDeadline(t time.Time) error {
	c.storeDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *conn) storeDeadline(t time.Time) {
	if t.IsZero() {
		c.reqDeadline.Store(0)
	} else {
		c.reqDeadline.Store(t.UnixNano())
	}
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

// connSet tracks the live connections of a run so Cancel can reach them.
// It is touched on dial and close only, never per request.
type connSet struct {
	dialTimeout time.Duration
	canceled    atomic.Bool
	mu          sync.Mutex
	conns       map[*conn]struct{}
}

func newConnSet(dialTimeout time.Duration) *connSet {
	return &connSet{dialTimeout: dialTimeout, conns: make(map[*conn]struct{})}
}

// dial is fasthttp's Dial: TCP with the run's dial timeout, wrapped.
func (s *connSet) dial(addr string) (net.Conn, error) {
	if s.canceled.Load() {
		return nil, errRunCanceled
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.dialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, set: s}
	c.addr = connAddr{Addr: nc.LocalAddr(), c: c}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	if s.canceled.Load() { // canceled while dialing
		c.Close()
		return nil, errRunCanceled
	}
	return c, nil
}

func (s *connSet) remove(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// cancel makes every blocked and future Read fail with errRunCanceled.
func (s *connSet) cancel() {
	s.canceled.Store(true)
	past := time.Unix(1, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Conn.SetDeadline(past)
	}
}

// connOf returns the run's conn behind a response's local address, nil if
// the address is not one of ours (TLS wraps the conn but keeps its
// LocalAddr, so this works for https too).
func connOf(a net.Addr) *conn {
	if ca, ok := a.(*connAddr); ok {
		return ca.c
	}
	return nil
}
