//go:build linux

package stamp

import (
	"io"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/clock"
)

// Push mode: a connection whose reader only parses what comes can be read
// by the poller itself. Each edge, the poller's goroutine reads what came
// and hands it to the connection's PushFunc, stamped as Read stamps it;
// no goroutine is woken per arrival, only the one waiting for the
// stream's end, once. Reads and parsing of all pushed streams run on that
// one goroutine, one after another: the kernel stamped each arrival
// already, so a stream waiting its turn keeps its stamps.

// PushFunc receives a pushed connection's bytes in order: p (valid only
// during the call; the function may change it) and the stamp of its
// bytes (clock.Mono ns), or, once, err: io.EOF when the peer closed, or
// the read's failure. It returns false to stop the push.
type PushFunc func(p []byte, stampNs int64, err error) (more bool)

// pushReads bounds the reads one edge of a pushed connection gets before
// the poller serves the others: a flooding stream is read in turns.
const pushReads = 8

// pushBufSize is the poller's read buffer for pushed connections.
const pushBufSize = 64 << 10

// pushState is a Conn's push registration.
type pushState struct {
	mu sync.Mutex // held while fn runs and while the push is set or cleared
	fn PushFunc
}

// Push hands c's reads to the poller until fn returns false, fails or
// Unpush: fn is called on the poller's goroutine, and on the caller's
// for what was already received, before Push returns. scratch is the
// caller's buffer for the latter. It reports false when c cannot be
// pushed (the caller reads it with Read as before).
func (c *Conn) Push(scratch []byte, fn PushFunc) bool {
	if c.shut.Load() || len(scratch) == 0 {
		return false
	}
	c.push.mu.Lock()
	defer c.push.mu.Unlock()
	c.push.fn = fn
	c.pushing.Store(true)
	// What Read had cut off and kept (kernel-offset) comes first.
	for len(c.pend) > 0 && c.push.fn != nil {
		n := eventEnd(c.pend)
		piece := c.pend[:n]
		c.pend = c.pend[n:]
		c.deliver(n, c.pendNs)
		c.pushOut(piece, c.Last())
	}
	// An edge that came before the push went to Read's flag, not to the
	// poller's push: read now what it announced.
	if c.push.fn != nil && (c.rready.Swap(false) || c.hup.Load()) {
		for c.pushRead(scratch) {
		}
	}
	return true
}

// Unpush ends c's push: when it returns, its PushFunc runs no more, and
// Read may be used again.
func (c *Conn) Unpush() {
	c.push.mu.Lock()
	c.push.fn = nil
	c.pushing.Store(false)
	c.push.mu.Unlock()
	c.rready.Store(true) // an edge the push took may have left bytes behind
}

// Pending is how many bytes were received and not handed out yet (Read
// returns them first).
func (c *Conn) Pending() int { return len(c.pend) }

// pushEdge serves an edge of a pushed connection on the poller's
// goroutine; it reports whether bytes may be left for another turn, and
// whether a goroutine may have been readied: the push ended (its waiter
// learns it), or the edge found the push ended and went to Read.
func (c *Conn) pushEdge(buf []byte) (more, readied bool) {
	c.push.mu.Lock()
	defer c.push.mu.Unlock()
	if c.push.fn == nil {
		c.rready.Store(true)
		poke(c.rwake)
		return false, true
	}
	more = c.pushRead(buf)
	return more, c.push.fn == nil
}

// pushRead reads what came into buf and hands it to the push, up to
// pushReads reads; it reports whether it stopped with bytes perhaps left.
// c.push.mu is held.
func (c *Conn) pushRead(buf []byte) (more bool) {
	for range pushReads {
		c.mu.RLock()
		if c.shut.Load() {
			c.mu.RUnlock()
			c.pushClosed()
			return false
		}
		n, err := recvmsg(uintptr(c.fd), &c.hdr, &c.iov, buf, c.oob[:], unix.MSG_DONTWAIT)
		c.mu.RUnlock()
		if err == unix.EINTR {
			continue
		}
		if !c.pushGot(buf, n, err) {
			return false
		}
	}
	return true
}

// pushClosed ends the push of a connection closed under it.
func (c *Conn) pushClosed() {
	c.pushEnd(&net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: net.ErrClosed})
}

// pushGot hands the push what one recvmsg into buf brought: n bytes, or
// its error (EAGAIN: nothing came). It reports whether to read again at
// once: the read filled buf, or the peer closed (no edge will come for
// the end). c.push.mu is held.
func (c *Conn) pushGot(buf []byte, n int, err error) (again bool) {
	switch {
	case err == unix.EAGAIN:
		return false
	case err != nil:
		c.pushEnd(&net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: wrapSyscall(err)})
		return false
	case n == 0:
		c.pushEnd(io.EOF)
		return false
	}
	stamp := c.readStamp()
	p := buf[:n]
	if c.split && c.obs.s != nil {
		c.obs.s.consumed.Add(int64(n))
	}
	for len(p) > 0 && c.push.fn != nil {
		k := len(p)
		if c.split {
			if k = eventEnd(p); k < len(p) {
				c.st.splitReads.Add(1)
			}
			c.off += int64(k)
			c.setLast(c.observed(stamp))
		} else {
			c.setLast(stamp)
		}
		c.pushOut(p[:k], c.Last())
		p = p[k:]
	}
	if c.push.fn == nil {
		if len(p) > 0 { // past the push's end: Read returns them
			c.pendBuf = append(c.pendBuf[:0], p...)
			c.pend, c.pendNs = c.pendBuf, stamp
		}
		return false
	}
	// A full buffer may have left bytes, and after the peer's close no
	// edge will come for its end: read on. Else the socket is empty and
	// the next edge says when more comes.
	return n == len(buf) || c.hup.Load()
}

// pushOut hands p to the push; a push that says no more ends.
func (c *Conn) pushOut(p []byte, stamp int64) {
	if !c.push.fn(p, stamp, nil) {
		c.push.fn = nil
	}
}

// pushEnd tells the push the connection ended and ends it.
func (c *Conn) pushEnd(err error) {
	c.push.fn(nil, 0, err)
	c.push.fn = nil
}

// readStamp is the stamp of the last recvmsg: the kernel's, else the clock.
func (c *Conn) readStamp() int64 {
	if real, ok := c.stamp(); ok {
		c.st.kernelReads.Add(1)
		return c.st.toMono(real)
	}
	c.st.fallbackReads.Add(1)
	return clock.Mono()
}
