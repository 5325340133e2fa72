package h1proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"syscall"

	"github.com/tracekit/tracekit/internal/chunked"
	"github.com/tracekit/tracekit/internal/clock"
)

// serve forwards one request (the native stack): it asks the tap whether
// to watch the exchange, reads a watched request's body whole, sends the
// request with the proxy's own client (rawForward) or an
// http.RoundTripper (rtForward), and tells the tap how it ended.
func (f *forwarder) serve(w *clientWriter, r *http.Request) {
	arrival := clock.Mono()
	var x Exchange
	if f.tap != nil {
		x = f.tap.Open(r, arrival)
	}
	// A watched request's body is kept whole (bounded); so is every body
	// when an http.RoundTripper sends it (it reads the body on its own
	// goroutine, which must not race the disconnect watcher). Other bodies
	// stream upstream as they come.
	var body []byte
	buffered := x != nil || f.pool == nil || r.ContentLength == 0
	if buffered && r.ContentLength != 0 {
		var status int
		var err error
		if body, status, err = readBody(r, f.maxBody); err != nil {
			w.jsonError(status, "invalid_request_error", "tracekit capture: "+err.Error())
			w.closeAfter = true
			if x != nil {
				x.End(Outcome{SendErr: err, DoneNs: clock.Mono()})
			}
			return
		}
	}
	if x != nil {
		x.Body(body)
	}
	var res Outcome
	if f.pool != nil {
		res = f.rawForward(w, r, body, buffered, x)
	} else {
		res = f.rtForward(w, r, body, x)
	}
	if res.ReadErr != nil && res.Status != 0 {
		w.abort() // the upstream broke off: so does the client's response
	}
	if x != nil {
		x.End(res)
	}
}

// badGateway answers an upstream that gave no response with a 502 saying
// why (never a success the upstream did not send).
func badGateway(w *clientWriter, what string, err error) {
	msg, _ := json.Marshal("tracekit capture: " + what + ": " + err.Error())
	body := `{"error":{"message":` + string(msg) + `,"type":"upstream_error","code":502}}`
	if w.writeHead(http.StatusBadGateway, http.Header{"Content-Type": {"application/json"}}, int64(len(body)), false) == nil {
		w.write([]byte(body))
	}
}

// rawForward is the proxy's own HTTP/1.1 client for a plain-http
// upstream. Each upstream read lands in one buffer and is written to the
// client socket as it is (an HTTP/1.1 upstream's chunked framing passes
// through verbatim; chunked.Scanner only finds the data in it and the body's
// end), then told to the tap on the same goroutine: no copy, no
// allocation and no goroutine hop per read. On Linux the evloop reads the response from its
// head on (rawBody.headOnLoop); a head it hands back, and every head
// elsewhere, is parsed by net/http.
func (f *forwarder) rawForward(w *clientWriter, r *http.Request, body []byte, buffered bool, x Exchange) Outcome {
	var res Outcome
	cc := w.cc
	rb := rawBody{w: w, x: x, res: &res}
	bp := f.bufs.Get().(*[]byte)
	defer f.bufs.Put(bp)
	res.SentNs = clock.Mono()
	head := f.requestHead(r, buffered, len(body))
	var uc *upConn
	var resp *http.Response
	onLoop := false // an evloop read the head and forwarded the response
	for attempt := 0; ; attempt++ {
		var err error
		uc, err = f.pool.get()
		if err != nil {
			res.SendErr, res.DoneNs = err, clock.Mono()
			badGateway(w, "upstream unreachable", err)
			return res
		}
		err = uc.s.writeBufs(head, body)
		if err == nil && !buffered {
			err = streamBody(uc.s, r)
		}
		if attempt == 0 {
			cc.watch.start(cc, uc.s.shutdown)
		} else {
			cc.watch.setAbort(uc.s.shutdown)
		}
		if err == nil {
			if rs, ok := uc.s.(*rawSock); ok && w.http11 && !w.head && !w.closeAfter && rb.headOnLoop(rs, uc, *bp) {
				onLoop = true
				break
			}
			// The first byte alone first: a connection that ends before any
			// byte of a response says io.EOF here (a stale one, whether the
			// server's FIN or RST ends it), where ReadResponse would say
			// io.ErrUnexpectedEOF as for a head cut short.
			if _, err = uc.br.Peek(1); err == nil {
				resp, err = readResponseHead(uc, r)
			}
		}
		if err == nil {
			break
		}
		if cc.watch.gone.Load() {
			cc.watch.stop(cc)
			uc.s.close()
			res.SendErr, res.ClientGone, res.DoneNs = err, true, clock.Mono()
			return res
		}
		// A kept-alive connection the server had closed: send once more
		// on a new one, when the request can be sent again.
		if attempt == 0 && uc.reused && buffered && staleConn(err) {
			uc.s.close() // the watcher's abort is set anew before it reads
			continue
		}
		cc.watch.stop(cc)
		uc.s.close()
		res.SendErr, res.DoneNs = err, clock.Mono()
		badGateway(w, "upstream unreachable", err)
		return res
	}
	if !onLoop {
		stamp := clock.Mono()
		res.Status = resp.StatusCode
		chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
		length := rb.frame(r.Method == http.MethodHead, resp.StatusCode, chunked, resp.ContentLength, resp.Close)
		enc := resp.Header.Get("Content-Encoding")
		rb.encoded = encoded(enc)
		if x != nil {
			x.Response(Response{Status: resp.StatusCode, Stamp: stamp, EventStream: isSSE(resp.Header), Encoding: enc, Loop: len(f.loops) > 0})
		}
		if err := w.writeHead(resp.StatusCode, resp.Header, length, chunked); err != nil { // forwards what it may
			res.ClientGone = true
		}
		rb.pass = chunked && w.mode == bodyRaw && !w.closeAfter // verbatim chunks
		rb.read(uc, *bp)
	}
	complete, reuse, t := rb.complete, rb.reuse, rb.t
	if t == 0 {
		t = clock.Mono()
	}
	res.DoneNs = t
	if complete && !res.ClientGone {
		if w.finish() != nil {
			res.ClientGone = true
		}
	}
	if cc.watch.stop(cc) {
		// abort shut the upstream connection down. A client that hangs up
		// after the whole response reached it did not cut anything: the
		// body's own verdict stands.
		reuse = false
		if !complete {
			res.ClientGone = true
			if res.ReadErr == nil {
				res.ReadErr = errors.New("the client went away")
			}
		}
	}
	if res.ClientGone {
		reuse = false
		if !complete && res.ReadErr == nil {
			res.ReadErr = errors.New("the client went away")
		}
	}
	res.Complete = complete
	if reuse && complete {
		f.pool.put(uc)
	} else {
		uc.s.close()
	}
	return res
}

// rawBody is the state of one response body being forwarded by
// rawForward.
type rawBody struct {
	w        *clientWriter
	x        Exchange // told each read; nil: not watched
	res      *Outcome
	cs       chunked.Scanner
	one      [1][]byte
	chunked  bool  // the upstream's body is chunked
	encoded  bool  // it has a Content-Encoding: its reads stay on the request's goroutine (Exchange.Read may wait)
	pass     bool  // its chunks go to the client verbatim
	left     int64 // Content-Length bytes still to come (-1: not delimited by length)
	complete bool  // the body ended as its framing said
	reuse    bool  // the upstream connection can be kept
	t        int64 // stamp of the last read
}

// frame sets b up for a response body as its head frames it (head: the
// request was a HEAD; contentLength -1: none) and returns its length for
// the client's head (-1: not known).
func (b *rawBody) frame(head bool, status int, chunked bool, contentLength int64, close bool) int64 {
	noBody := head || status == http.StatusNoContent || status == http.StatusNotModified
	b.chunked, b.reuse, b.left = chunked, !close, -1
	switch {
	case noBody:
		b.left = 0
	case !chunked && contentLength >= 0:
		b.left = contentLength
	case !chunked:
		b.reuse = false // ends when the upstream closes
	}
	b.complete = noBody || b.left == 0
	return b.left
}

// read forwards the body: first what the head's read buffered, then
// straight from the socket, inside one RawRead: each read is forwarded
// and told to the tap in the callback, which reads again until the socket
// says EAGAIN and only then waits for the poller. (Waiting right after a short
// read would save that read, but a peer's FIN that came with the data
// raises no further readiness edge: an upstream cut mid-body would then
// never be seen.)
func (b *rawBody) read(uc *upConn, buf []byte) {
	if b.complete || b.res.ClientGone {
		return
	}
	if len(uc.pre) > 0 || uc.preErr != nil {
		b.loopBuffered(uc, buf) // a head an evloop handed back came with more
		return
	}
	if n := uc.br.Buffered(); n > 0 {
		k, _ := uc.br.Read(buf[:min(n, len(buf))])
		if !b.process(buf[:k], clock.Mono(), nil) || uc.br.Buffered() > 0 {
			b.loopBuffered(uc, buf)
			return
		}
	}
	// A socket an evloop owns (loop_linux.go): an uncompressed body goes
	// to the loop; a slow client's, and a compressed one, are read here
	// through the socket's own waits.
	if rs, ok := uc.s.(*rawSock); ok {
		if !b.encoded && b.viaLoop(rs) {
			return
		}
		b.loopBuffered(uc, buf)
		return
	}
	ns, ok := uc.s.(netSock)
	if !ok {
		b.loopBuffered(uc, buf)
		return
	}
	sc, ok := ns.Conn.(syscall.Conn)
	if !ok {
		b.loopBuffered(uc, buf)
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		b.process(nil, clock.Mono(), err)
		return
	}
	ended := false
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			if err == syscall.EINTR {
				continue
			}
			if err == syscall.EAGAIN {
				return false
			}
			t := clock.Mono()
			if err == nil && n == 0 {
				err = io.EOF
			}
			if n < 0 {
				n = 0
			}
			if !b.process(buf[:n], t, err) {
				ended = true
				return true
			}
		}
	})
	if !ended {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		b.process(nil, clock.Mono(), err) // closed under us (the client went away)
	}
}

// loopBuffered is read through the connection's bufio.Reader (a conn
// without a file descriptor, or bytes left buffered).
func (b *rawBody) loopBuffered(uc *upConn, buf []byte) {
	for {
		if b.complete || b.res.ClientGone {
			return
		}
		n, err := uc.br.Read(buf)
		if !b.process(buf[:n], clock.Mono(), err) {
			return
		}
	}
}

// process forwards one read of the body (raw, stamped t; err is the
// read's error) and records it; false means the forward is over.
func (b *rawBody) process(raw []byte, t int64, err error) bool {
	if b.complete || b.res.ClientGone {
		return false
	}
	b.t = t
	n := len(raw)
	var segs [][]byte
	switch {
	case b.chunked:
		var end int
		var cerr error
		segs, end, b.complete, cerr = b.cs.Scan(raw)
		if end < n {
			b.reuse = false // bytes past the body's end: not to be trusted
		}
		raw = raw[:end]
		if cerr != nil {
			err = fmt.Errorf("upstream body: %w", cerr)
		}
	case b.left >= 0:
		if int64(n) > b.left {
			raw, b.reuse = raw[:b.left], false // more than its Content-Length said
		}
		b.left -= int64(len(raw))
		b.complete = b.left == 0
		b.one[0], segs = raw, b.one[:]
	default:
		b.one[0], segs = raw, b.one[:]
	}
	if len(raw) > 0 {
		var werr error
		if b.pass || !b.chunked && b.w.mode == bodyRaw {
			werr = b.w.write(raw)
		} else {
			werr = b.w.writeSegs(segs)
		}
		if werr != nil {
			b.res.ClientGone = true
		}
	}
	if b.x != nil {
		for _, s := range segs {
			if len(s) > 0 {
				b.x.Read(s, t)
			}
		}
	}
	if b.complete || b.res.ClientGone {
		return false
	}
	if err != nil {
		if err == io.EOF && b.left < 0 && !b.chunked {
			b.complete = true // a body delimited by the upstream's close
			return false
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		b.res.ReadErr, b.reuse = err, false
		return false
	}
	return true
}

// staleConn reports whether err means a kept-alive connection had been
// closed by the server before it answered: the request could not be
// written, or the connection ended before the response's first byte.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readResponseHead reads the response head, skipping informational (1xx)
// responses, all of them within maxResponseHead.
func readResponseHead(uc *upConn, r *http.Request) (*http.Response, error) {
	uc.headLeft = maxResponseHead
	defer func() { uc.headLeft = 0 }()
	for {
		resp, err := http.ReadResponse(uc.br, r)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 != 1 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// requestHead is the upstream request's head: the upstream's path prefix
// and host, the client's headers without hop-by-hop ones, and the body's
// framing.
func (f *forwarder) requestHead(r *http.Request, buffered bool, n int) []byte {
	u := *f.upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	b := make([]byte, 0, 512)
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, u.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, f.upstream.Host...)
	b = append(b, '\r', '\n')
	conn := r.Header["Connection"]
	for k, vs := range r.Header {
		if k == "Host" || k == "Content-Length" || !forwarded(k, conn) {
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ':', ' ')
			b = appendHeaderValue(b, v)
			b = append(b, '\r', '\n')
		}
	}
	switch {
	case buffered && (n > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch):
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '\r', '\n')
	case !buffered && r.ContentLength > 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, r.ContentLength, 10)
		b = append(b, '\r', '\n')
	case !buffered:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	return append(b, '\r', '\n')
}

// streamBody copies a request body upstream as it arrives: as is with a
// Content-Length, re-chunked without one.
func streamBody(c io.Writer, r *http.Request) error {
	if r.ContentLength > 0 {
		n, err := io.CopyN(c, r.Body, r.ContentLength)
		if err != nil && n < r.ContentLength {
			return fmt.Errorf("streaming the request body upstream: %w", err)
		}
		return nil
	}
	cw := httputil.NewChunkedWriter(c)
	if _, err := io.Copy(cw, r.Body); err != nil {
		return fmt.Errorf("streaming the request body upstream: %w", err)
	}
	if err := cw.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(c, "\r\n")
	return err
}

// rtForward sends the request through an http.RoundTripper (an https
// upstream, or Config.Transport) and copies the body to the client as it
// arrives: each read is written before anything else is done with it,
// then told to the tap.
func (f *forwarder) rtForward(w *clientWriter, r *http.Request, body []byte, x Exchange) Outcome {
	var res Outcome
	cc := w.cc
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := f.upstreamRequest(ctx, r, body, false)
	if err != nil {
		w.jsonError(http.StatusBadRequest, "invalid_request_error", "tracekit capture: "+err.Error())
		res.SendErr, res.DoneNs = err, clock.Mono()
		return res
	}
	cc.watch.start(cc, cancel)
	res.SentNs = clock.Mono()
	resp, err := f.rt.RoundTrip(out)
	if err != nil {
		res.SendErr, res.DoneNs = err, clock.Mono()
		if cc.watch.stop(cc) {
			res.ClientGone = true
			return res
		}
		badGateway(w, "upstream unreachable", err)
		return res
	}
	defer resp.Body.Close()
	stamp := clock.Mono()
	res.Status = resp.StatusCode
	h := make(http.Header, len(resp.Header))
	copyHeaders(h, resp.Header)
	if x != nil {
		x.Response(Response{Status: resp.StatusCode, Stamp: stamp, EventStream: isSSE(resp.Header), Encoding: resp.Header.Get("Content-Encoding")})
	}
	if err := w.writeHead(resp.StatusCode, h, resp.ContentLength, false); err != nil {
		res.ClientGone = true
	}
	bp := f.bufs.Get().(*[]byte)
	defer f.bufs.Put(bp)
	buf := *bp
	var t int64
	for !res.ClientGone {
		n, err := resp.Body.Read(buf)
		t = clock.Mono()
		if n > 0 && w.write(buf[:n]) != nil {
			res.ClientGone = true
		}
		if n > 0 && x != nil {
			x.Read(buf[:n], t)
		}
		if err == io.EOF {
			res.Complete = true
			break
		}
		if err != nil {
			res.ReadErr = err
			break
		}
	}
	if t == 0 {
		t = clock.Mono()
	}
	res.DoneNs = t
	if res.Complete && !res.ClientGone && w.finish() != nil {
		res.ClientGone = true
	}
	if cc.watch.stop(cc) && !res.Complete {
		res.ClientGone = true
	}
	return res
}
