package mock

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// reapIdle is how long a keep-alive connection may stay idle when neither
// Config.IdleClose nor an idleclose fault says otherwise.
const reapIdle = 2 * time.Minute

// trackedConn is a server connection whose idle periods the mock watches,
// to close it the way some servers and proxies do: after an idle time
// (uvicorn's timeout_keep_alive) or right after a response, in both cases
// without having said Connection: close.
//
// An idle period starts when net/http reports the connection idle (the
// response is flushed, no request is in flight) and ends at the first byte
// read. Its timer closes the connection only if no byte has arrived in
// the meantime, not even one still in the kernel's receive queue, as an
// event loop that handles reads before due timers does (uvicorn's).
type trackedConn struct {
	*net.TCPConn
	s *Server

	idle atomic.Bool // lock-free check on every Read

	mu    sync.Mutex
	gen   uint64      // counts idle periods; a timer acts only on its own
	timer *time.Timer // the current idle period's close
	done  bool        // closed, hijacked or closing
	next  connPlan    // what the request in flight asked for its idle period
}

// connPlan is what the handler of a request wants done with its
// connection once the response is complete.
type connPlan struct {
	closeAfter bool          // close at once
	idleClose  time.Duration // close after this idle time; 0: the server's setting
}

// trackingListener wraps every accepted connection in a trackedConn.
type trackingListener struct {
	*net.TCPListener
	s *Server
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	return &trackedConn{TCPConn: c, s: l.s}, nil
}

// Read ends the idle period at the first byte of the next request.
func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	if n > 0 && c.idle.Load() {
		c.mu.Lock()
		c.endIdle()
		c.mu.Unlock()
	}
	return n, err
}

// endIdle stops the idle period's timer; c.mu is held.
func (c *trackedConn) endIdle() {
	c.idle.Store(false)
	c.gen++
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// plan records what the current request wants done after its response.
func (c *trackedConn) plan(p connPlan) {
	c.mu.Lock()
	c.next = p
	c.mu.Unlock()
}

// connState follows net/http's view of each connection (http.Server.ConnState).
func (s *Server) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*trackedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle:
		c.responseDone()
	case http.StateHijacked, http.StateClosed:
		c.mu.Lock()
		c.done = true
		c.endIdle()
		c.mu.Unlock()
	}
}

// responseDone starts an idle period: the response has been flushed and
// the connection waits for the next request. It runs on the connection's
// serving goroutine before that goroutine reads again.
func (c *trackedConn) responseDone() {
	cfg := &c.s.cfg
	c.mu.Lock()
	p := c.next
	c.next = connPlan{}
	if c.done {
		c.mu.Unlock()
		return
	}
	if p.closeAfter || cfg.CloseAfterResponse {
		c.done = true
		c.mu.Unlock()
		c.s.m.closedAfterResponse.Add(1)
		c.TCPConn.Close()
		return
	}
	d, counted := p.idleClose, true
	if d == 0 {
		d = cfg.IdleClose.D()
	}
	if d == 0 {
		d, counted = reapIdle, false
	}
	c.endIdle()
	c.idle.Store(true)
	gen := c.gen
	c.timer = time.AfterFunc(d, func() { c.idleExpired(gen, counted) })
	c.mu.Unlock()
}

// idleExpired closes the connection if idle period gen is still running
// and no byte of a next request is waiting in the socket.
func (c *trackedConn) idleExpired(gen uint64, counted bool) {
	c.mu.Lock()
	if c.done || c.gen != gen || !c.idle.Load() || c.pending() {
		c.mu.Unlock()
		return
	}
	c.done = true
	c.endIdle()
	c.mu.Unlock()
	if counted {
		c.s.m.idleCloses.Add(1)
	}
	c.TCPConn.Close() // nothing unread: a FIN, not a reset
}

// pending reports whether bytes wait unread in the socket's receive queue.
func (c *trackedConn) pending() bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), ioctlInQueue) })
	return n > 0
}
