package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/chunked"
	"github.com/tracekit/tracekit/internal/clock"
)

// h1Client is one target's HTTP/1.1 client: a pool of keep-alive
// connections dialed through the run's connSet. Requests are built and
// written by fasthttp's Request and response headers parsed by its
// ResponseHeader; the connections, the pool and the bodies are replay's
// own, so that the body of a response is read by replay's code from its
// first byte to its last and its connection goes back to the pool then.
//
// The pool is a stack: the connection put back last is taken first, so a
// few hot connections serve light traffic and the others age out. A
// connection idle longer than idleTimeout is closed, never reused: the
// server may have closed it already (uvicorn does after 5 s).
type h1Client struct {
	addr        string
	dial        func(addr string) (net.Conn, error) // connSet.dialer: each conn a *conn
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*conn // idle[0] was put back first
	closed bool
}

// readBufSize is a connection's read buffer: it holds the response
// headers (larger ones are refused) and, in bodies, what one read of the
// network brought and the reader has not taken yet. 4 KiB a stream
// matters at 10,000 streams.
const readBufSize = 4 << 10

// writeBufs holds the buffers requests are written through, shared by
// all connections: a request is written at once, so no connection keeps
// one. Bodies larger than the buffer go to the connection directly.
var writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}

// get returns a pooled connection idle for less than idleTimeout, or a
// new one.
func (h *h1Client) get() (*conn, error) {
	now := clock.Mono()
	for {
		h.mu.Lock()
		n := len(h.idle)
		if n == 0 {
			h.mu.Unlock()
			return h.dialConn()
		}
		c := h.idle[n-1]
		h.idle[n-1] = nil
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		if h.idleTimeout <= 0 || now-c.readNs.Load() <= int64(h.idleTimeout) {
			return c, nil
		}
		c.Close()
	}
}

// dialConn dials a new connection.
func (h *h1Client) dialConn() (*conn, error) {
	nc, err := h.dial(h.addr)
	if err != nil {
		return nil, err
	}
	c := nc.(*conn)
	c.br = bufio.NewReaderSize(c, readBufSize)
	return c, nil
}

// put returns c to the pool after a response was read to its end; the
// connections there idle longer than idleTimeout are closed on the way.
func (h *h1Client) put(c *conn) {
	now := clock.Mono()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		c.Close()
		return
	}
	stale := 0
	for stale < len(h.idle) && h.idleTimeout > 0 && now-h.idle[stale].readNs.Load() > int64(h.idleTimeout) {
		stale++
	}
	var old []*conn
	if stale > 0 {
		old = append(old, h.idle[:stale]...)
		h.idle = append(h.idle[:0], h.idle[stale:]...)
		clear(h.idle[len(h.idle):cap(h.idle)])
	}
	h.idle = append(h.idle, c)
	h.mu.Unlock()
	for _, s := range old {
		s.Close()
	}
}

// closeIdle closes the pooled connections; those put back later are
// closed instead of pooled.
func (h *h1Client) closeIdle() {
	h.mu.Lock()
	idle := h.idle
	h.idle, h.closed = nil, true
	h.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// roundTrip writes req on c with deadline (zero: none) bounding the whole
// exchange and reads the response headers into resp; the body is left to
// resp's reader. c is closed on failure.
func (h *h1Client) roundTrip(c *conn, req *fasthttp.Request, resp *h1Resp, deadline time.Time) error {
	resp.start(h, c)
	c.SetDeadline(deadline) // a pooled connection keeps its last request's otherwise
	bw := writeBufs.Get().(*bufio.Writer)
	bw.Reset(c)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writeBufs.Put(bw)
	if err == nil {
		err = resp.readHead(!req.Header.ConnectionClose())
	}
	if err != nil {
		c.Close() // resp.c stays, for its send time and deadlines
		resp.body.err = err
	}
	return err
}

// maxInterim bounds the 1xx responses before the final one.
const maxInterim = 8

// h1Resp is one response: its headers and a reader of its body. The
// connection goes back to the pool when the body was read to its end.
type h1Resp struct {
	Header fasthttp.ResponseHeader
	c      *conn
	h      *h1Client
	body   h1Body
}

func (r *h1Resp) start(h *h1Client, c *conn) {
	r.Header.Reset()
	r.h, r.c = h, c
	ch := r.body.ch
	ch.Reset() // its buffer kept
	r.body = h1Body{c: c, ch: ch}
}

// readHead reads the response headers, skipping 1xx ones, and sets the
// body's framing; keep is false when the request asked to close the
// connection after the response.
func (r *h1Resp) readHead(keep bool) error {
	for n := 0; ; n++ {
		if err := r.Header.Read(r.c.br); err != nil {
			return err
		}
		if s := r.Header.StatusCode(); s >= 200 || s == fasthttp.StatusSwitchingProtocols {
			break
		}
		if n == maxInterim {
			return fmt.Errorf("more than %d interim (1xx) responses", maxInterim)
		}
	}
	b := &r.body
	b.keep = keep && !r.Header.ConnectionClose()
	switch s, cl := r.Header.StatusCode(), r.Header.ContentLength(); {
	case s == fasthttp.StatusNoContent || s == fasthttp.StatusNotModified || s == fasthttp.StatusSwitchingProtocols:
		b.frame, b.keep = bodyLength, b.keep && s != fasthttp.StatusSwitchingProtocols
	case cl >= 0:
		b.frame, b.left = bodyLength, int64(cl)
	case cl == -1:
		b.frame = bodyChunked
	default:
		b.frame, b.keep = bodyToClose, false
	}
	return nil
}

// StatusCode is the response's status.
func (r *h1Resp) StatusCode() int { return r.Header.StatusCode() }

// Body is the reader of the response's body.
func (r *h1Resp) Body() io.Reader { return &r.body }

// close ends the response: its connection goes back to the pool when the
// body was read to its end without an error and the server keeps it
// open, else it is closed. readErr is the caller's last read error.
func (r *h1Resp) close(readErr error) {
	c := r.c
	if c == nil {
		return
	}
	r.c = nil
	if readErr == nil && r.body.err == nil && r.body.ended() && r.body.keep && c.br.Buffered() == 0 {
		r.h.put(c)
		return
	}
	c.Close()
}

// bodyFrame is how a body's end is found.
type bodyFrame uint8

const (
	bodyLength  bodyFrame = iota // Content-Length bytes (0 without a body)
	bodyChunked                  // chunked transfer coding
	bodyToClose                  // until the server closes the connection
)

// h1Body reads a response body off its connection's buffered reader. Each
// Read makes at most one read of the network, so the connection's last
// receive stamp is the one of the bytes it returns.
type h1Body struct {
	c     *conn
	frame bodyFrame
	left  int64 // bodyLength: bytes not read yet
	ch    chunked.Scanner
	keep  bool // the server keeps the connection open after the body
	eof   bool // bodyToClose: the server closed
	err   error
}

// ended reports whether the whole body was read.
func (b *h1Body) ended() bool {
	switch b.frame {
	case bodyLength:
		return b.left == 0
	case bodyChunked:
		return b.ch.Done()
	}
	return b.eof
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if b.ended() {
			return 0, io.EOF
		}
		if b.frame == bodyLength {
			p = p[:min(int64(len(p)), b.left)] // never wait for bytes past the body
		}
		raw, err := b.c.br.Read(p)
		n, ferr := b.take(p[:raw])
		switch {
		case ferr != nil:
			return n, b.fail(ferr)
		case err == io.EOF && b.frame == bodyToClose:
			b.eof = true
		case err != nil && !b.ended():
			return n, b.fail(err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// take consumes raw, bytes of the body as read off the connection, and
// leaves the body's data at its front: raw[:n]. Bytes past the body's end
// mean the connection is not clean for another request.
func (b *h1Body) take(raw []byte) (n int, err error) {
	switch b.frame {
	case bodyLength:
		n = int(min(int64(len(raw)), b.left))
		b.left -= int64(n)
		if n < len(raw) {
			b.keep = false
		}
		return n, nil
	case bodyToClose:
		return len(raw), nil
	}
	segs, end, _, err := b.ch.Scan(raw)
	for _, s := range segs { // in order within raw: each moves left, if at all
		n += copy(raw[n:], s)
	}
	if end < len(raw) {
		b.keep = false
	}
	return n, err
}

// fail keeps err for every later Read; the connection's end before the
// body's is io.ErrUnexpectedEOF.
func (b *h1Body) fail(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	b.err = err
	return err
}
