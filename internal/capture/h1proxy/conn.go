package h1proxy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tracekit/tracekit/internal/chunked"
)

var errTooManyFiles = syscall.EMFILE

// headerTimeout bounds reading a request's head once its first byte came.
const headerTimeout = 30 * time.Second

// clientConn is one client connection: its goroutine (serve) reads a
// request, forwards it and its response, and reads the next one.
type clientConn struct {
	srv *nativeServer
	f   *forwarder
	c   net.Conn
	br  *bufio.Reader

	mu     sync.Mutex
	idle   bool // waiting for a request (Shutdown may close it)
	closed bool

	// out is the response head and framing being written (reused); hout
	// a head an evloop writes (clientWriter.held).
	out, hout []byte
	// watch is the response's disconnect watcher (watch.go).
	watch watcher
	// headLeft bounds what a request head may take (serve).
	headLeft headBudget
}

// maxRequestHead bounds a request's head, as net/http's server does by
// default.
const maxRequestHead = 1 << 20

var errRequestHeadTooLarge = fmt.Errorf("request head larger than %d bytes", maxRequestHead)

// clientReader is what a client connection's bufio.Reader reads: the
// connection, within headLeft while a head is read.
type clientReader struct{ cc *clientConn }

func (r clientReader) Read(p []byte) (int, error) {
	return r.cc.headLeft.read(r.cc.c, p, errRequestHeadTooLarge)
}

// headBudget is what a message head may still take from its connection:
// zero while no head is being read (no bound), negative once it is spent.
type headBudget int64

// read reads r into p within the budget; tooLarge is the error once it is
// spent.
func (b *headBudget) read(r io.Reader, p []byte, tooLarge error) (int, error) {
	switch {
	case *b == 0:
		return r.Read(p)
	case *b < 0:
		return 0, tooLarge
	}
	n, err := r.Read(p[:min(int64(len(p)), int64(*b))])
	if *b -= headBudget(n); *b == 0 {
		*b = -1
	}
	return n, err
}

// serve reads and answers requests until the client or the proxy closes
// the connection.
func (cc *clientConn) serve() {
	defer cc.srv.remove(cc)
	defer cc.c.Close()
	cc.br = bufioPool.Get().(*bufio.Reader)
	cc.br.Reset(clientReader{cc})
	defer func() { cc.br.Reset(nil); bufioPool.Put(cc.br) }()
	for {
		if !cc.setIdle(true) {
			return
		}
		if _, err := cc.br.Peek(1); err != nil {
			return // closed or cut while idle
		}
		if !cc.setIdle(false) {
			return
		}
		cc.c.SetReadDeadline(time.Now().Add(headerTimeout))
		cc.headLeft = maxRequestHead
		req, err := http.ReadRequest(cc.br)
		cc.headLeft = 0
		cc.c.SetReadDeadline(time.Time{})
		if err != nil {
			if errors.Is(err, errRequestHeadTooLarge) {
				cc.plainError(http.StatusRequestHeaderFieldsTooLarge, err.Error())
				return
			}
			if err != io.EOF {
				cc.plainError(http.StatusBadRequest, "reading the request: "+err.Error())
			}
			return
		}
		if !cc.handle(req) || cc.srv.isClosing() {
			return
		}
	}
}

// setIdle records whether the connection waits for a request; false means
// the server is closing and the connection must end. The flag is set
// before closing is read, and Shutdown sets closing before it looks at
// the flags: either it closes this connection or this sees it closing.
// The two locks are never held together here (Shutdown holds the
// server's while it takes each connection's).
func (cc *clientConn) setIdle(idle bool) bool {
	cc.mu.Lock()
	cc.idle = idle
	closed := cc.closed
	cc.mu.Unlock()
	return !closed && !(idle && cc.srv.isClosing())
}

// closeIfIdle closes the connection when no request is in flight (Shutdown).
func (cc *clientConn) closeIfIdle() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.idle && !cc.closed {
		cc.closed = true
		cc.c.Close()
	}
}

// cut closes the connection whatever it does (Shutdown's grace is up):
// its watcher sees it and aborts the upstream request.
func (cc *clientConn) cut() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.closed {
		cc.closed = true
		cc.c.Close()
	}
}

// handle answers one request; false means the connection must close.
func (cc *clientConn) handle(req *http.Request) bool {
	keep := !req.Close && (req.ProtoAtLeast(1, 1) || req.Header.Get("Connection") == "keep-alive")
	if req.Header.Get("Expect") != "" {
		if !equalFoldASCII(req.Header.Get("Expect"), "100-continue") {
			cc.plainError(http.StatusExpectationFailed, "unsupported Expect header")
			return false
		}
		req.Header.Del("Expect")
		if req.ContentLength != 0 {
			if _, err := cc.c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
				return false
			}
		}
	}
	w := &clientWriter{cc: cc, http11: req.ProtoAtLeast(1, 1), head: req.Method == http.MethodHead}
	cc.f.serve(w, req)
	// Whatever the handler left of the body is read (bounded) so that the
	// next request starts at its first byte.
	if w.broken || !w.wrote {
		return false
	}
	if req.Body != nil {
		if n, _ := io.CopyN(io.Discard, req.Body, 256<<10); n == 256<<10 {
			return false
		}
		if err := req.Body.Close(); err != nil {
			return false
		}
	}
	return keep && !w.closeAfter
}

// plainError answers with a status and a text message, then the
// connection closes.
func (cc *clientConn) plainError(status int, msg string) {
	body := "tracekit capture: " + msg + "\n"
	fmt.Fprintf(cc.c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// clientWriter writes one response to the client: its head, then its body
// framed as the head said. Body bytes are written straight to the socket,
// one write per call.
type clientWriter struct {
	cc         *clientConn
	http11     bool
	head       bool // a HEAD request: no body
	wrote      bool // the head was written
	broken     bool // a write failed or the body was cut: close the connection
	closeAfter bool // the body is delimited by closing the connection
	mode       bodyMode
	left       int64 // content-length mode: bytes still to write
	gone       atomic.Bool
	// raw: body bytes go straight to the socket's descriptor rawFd (an
	// evloop forwards the body and holds the socket); what it could not
	// take at once waits in pending for the request's goroutine.
	raw     bool
	rawFd   int
	pending []byte
	// held is a head an evloop parsed (in clientConn.hout), written with
	// the first body bytes that came with it.
	held []byte
}

// bodyMode is how a response body is framed towards the client.
type bodyMode uint8

const (
	bodyNone    bodyMode = iota // no body (HEAD, 204, 304)
	bodyRaw                     // bytes as given: Content-Length, close-delimited, or an upstream's chunked bytes passed through
	bodyChunked                 // each write is framed as one chunk by the writer
)

// writeHead sends the status line and the headers that are forwarded
// (forwarded: not hop-by-hop ones). length is the body's
// length (-1 unknown); passChunked says the body bytes will be already
// chunked (an HTTP/1.1 upstream's, forwarded verbatim).
func (w *clientWriter) writeHead(status int, h http.Header, length int64, passChunked bool) error {
	b := appendStatusLine(w.cc.out[:0], status)
	conn := h["Connection"]
	for k, vs := range h {
		if k == "Content-Length" || !forwarded(k, conn) {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ':', ' ')
			b = appendHeaderValue(b, v)
			b = append(b, '\r', '\n')
		}
	}
	b = w.endHead(b, status, length, passChunked, h.Get("Content-Length"))
	w.cc.out = b
	w.wrote = true
	_, err := w.cc.c.Write(b)
	if err != nil {
		w.broken = true
		w.gone.Store(true)
	}
	return err
}

// appendStatusLine appends a response's status line.
func appendStatusLine(b []byte, status int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	return append(b, '\r', '\n')
}

// endHead appends a head's framing and its end, and sets the body mode
// they say (writeHead's length and passChunked; headCL is the upstream's
// Content-Length, kept for a HEAD request).
func (w *clientWriter) endHead(b []byte, status int, length int64, passChunked bool, headCL string) []byte {
	noBody := w.head || status == http.StatusNoContent || status == http.StatusNotModified || status/100 == 1
	switch {
	case noBody:
		w.mode = bodyNone
		if headCL != "" && w.head {
			b = append(b, "Content-Length: "...)
			b = append(b, headCL...)
			b = append(b, '\r', '\n')
		}
	case length >= 0:
		w.mode, w.left = bodyRaw, length
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		b = append(b, '\r', '\n')
	case w.http11 && passChunked:
		w.mode, w.left = bodyRaw, -1
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	case w.http11:
		w.mode, w.left = bodyChunked, -1
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	default: // an HTTP/1.0 client and a body of unknown length
		w.mode, w.left, w.closeAfter = bodyRaw, -1, true
	}
	if w.closeAfter {
		b = append(b, "Connection: close\r\n"...)
	}
	return append(b, '\r', '\n')
}

// write sends body bytes (framing them as one chunk in bodyChunked mode).
func (w *clientWriter) write(p []byte) error {
	if len(p) == 0 || w.mode == bodyNone {
		return nil
	}
	var err error
	if w.mode == bodyChunked {
		w.cc.out = chunked.AppendChunk(w.cc.out[:0], p)
		err = w.put(w.cc.out)
	} else {
		if w.left >= 0 {
			w.left -= int64(len(p))
		}
		err = w.put(p)
	}
	if err != nil {
		w.broken = true
		w.gone.Store(true)
	}
	return err
}

// writeSegs writes data pieces as one write (copied into the head buffer),
// framed as one chunk in bodyChunked mode.
func (w *clientWriter) writeSegs(segs [][]byte) error {
	total := 0
	for _, s := range segs {
		total += len(s)
	}
	if total == 0 || w.mode == bodyNone {
		return nil
	}
	b := w.cc.out[:0]
	if w.mode == bodyChunked {
		b = chunked.AppendHex(b, uint64(total))
		b = append(b, '\r', '\n')
	}
	for _, s := range segs {
		b = append(b, s...)
	}
	if w.mode == bodyChunked {
		b = append(b, '\r', '\n')
	}
	w.cc.out = b
	if w.left >= 0 {
		w.left -= int64(total)
	}
	err := w.put(b)
	if err != nil {
		w.broken = true
		w.gone.Store(true)
	}
	return err
}

// put writes body bytes: through the connection, or in raw mode to its
// descriptor, keeping in pending what the socket did not take at once
// (and everything after it, in order).
func (w *clientWriter) put(p []byte) error {
	if len(w.held) > 0 {
		p = append(w.held, p...)
		w.cc.hout, w.held = p[:0], nil
	}
	if !w.raw {
		_, err := w.cc.c.Write(p)
		return err
	}
	if len(w.pending) > 0 {
		w.pending = append(w.pending, p...)
		return nil
	}
	n, err := rawWrite(w.rawFd, p)
	if err == syscall.EAGAIN {
		w.pending = append(w.pending[:0], p[n:]...)
		return nil
	}
	return err
}

// flushHead writes a held head on its own (no body bytes came with it).
func (w *clientWriter) flushHead() error {
	if len(w.held) == 0 {
		return nil
	}
	err := w.put(nil)
	if err != nil {
		w.broken = true
		w.gone.Store(true)
	}
	return err
}

// finish ends a complete body: the last chunk in bodyChunked mode.
func (w *clientWriter) finish() error {
	if w.mode != bodyChunked || w.broken {
		return nil
	}
	_, err := w.cc.c.Write([]byte("0\r\n\r\n"))
	if err != nil {
		w.broken = true
	}
	return err
}

// abort marks the body as cut: the connection closes without ending it,
// so the client sees the response break off as the upstream's did.
func (w *clientWriter) abort() { w.broken = true }

// jsonError answers with status and an OpenAI-style JSON error.
func (w *clientWriter) jsonError(status int, typ, msg string) {
	q, _ := json.Marshal(msg)
	body := `{"error":{"message":` + string(q) + `,"type":"` + typ + `","code":` + strconv.Itoa(status) + `}}`
	h := http.Header{"Content-Type": {"application/json"}}
	if w.writeHead(status, h, int64(len(body)), false) == nil {
		w.write([]byte(body))
	}
}

// appendHeaderValue appends v with any CR or LF replaced by a space (a
// value never splits the head).
func appendHeaderValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// equalFoldASCII reports whether a (a string or bytes, not converted)
// equals b, ignoring ASCII case.
func equalFoldASCII[T string | []byte](a T, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
