package capture

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/record"
)

// defaultTransport reaches the upstream without timeouts on responses
// (streams are long) and without compression (the client's Accept-Encoding
// passes through; ours is never added). The proxy's own client
// (rawForward) serves plain-http upstreams; this transport serves https
// ones and CheckUpstream.
func defaultTransport(insecure bool) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true, // pass the client's Accept-Encoding, never add ours
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: insecure},
	}
}

// forwarded reports whether a header (canonical key k) passes to the
// other side: not a connection-level one a proxy must not forward, and not
// one the message's Connection header (conn, its values) names.
func forwarded(k string, conn []string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return false
		}
	}
	for _, f := range conn {
		for f != "" {
			var name string
			name, f, _ = strings.Cut(f, ",")
			if strings.EqualFold(strings.TrimSpace(name), k) {
				return false
			}
		}
	}
	return true
}

// hopHeaders are the connection-level headers a proxy does not forward,
// in canonical form.
var hopHeaders = [...]string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// hopByHop reports whether a header name (any case) is one of hopHeaders.
func hopByHop(name []byte) bool {
	for _, h := range hopHeaders {
		if equalFoldASCII(name, h) {
			return true
		}
	}
	return false
}

// copyHeaders copies src's forwarded headers into dst.
func copyHeaders(dst, src http.Header) {
	conn := src["Connection"]
	for k, vs := range src {
		if forwarded(k, conn) {
			dst[k] = append(dst[k][:0:0], vs...)
		}
	}
}

// fwdResult is how one exchange went at the HTTP level.
type fwdResult struct {
	sentNs, headersNs, doneNs int64
	status                    int
	sendErr                   error // no response
	readErr                   error // the upstream body broke off
	clientGone                bool  // writing to the client failed, or it went away
	sse                       bool
	jsonBody                  []byte // a non-SSE body, bounded, for FeedJSON
	// undecoded names a Content-Encoding the proxy cannot decode (its
	// events are not parsed); decodeErr says why a compressed body could
	// not be decoded.
	undecoded string
	decodeErr error
}

// exchange is one recorded LLM call in flight.
type exchange struct {
	arrival int64
	stream  *record.Stream
	res     fwdResult
}

// maxJSONBody bounds the non-streaming body kept for parsing.
const maxJSONBody = 16 << 20

// serve forwards one request and records it when it is an LLM call.
func (p *Proxy) serve(w *clientWriter, r *http.Request) {
	arrival := clock.Mono()
	p.enter()
	defer p.leave()
	llm := r.Method == http.MethodPost && isLLMPath(r.URL.Path)
	if r.Method == http.MethodPost && !llm {
		p.warnUnparsed(r.URL.Path)
	}
	// An LLM call's body is kept whole for parsing (bounded); so is every
	// body when an http.RoundTripper sends it (it reads the body on its
	// own goroutine, which must not race the disconnect watcher). Other
	// bodies stream upstream as they come.
	var body []byte
	buffered := llm || p.pool == nil || r.ContentLength == 0
	if buffered && r.ContentLength != 0 {
		if r.ContentLength > p.cfg.MaxBodyBytes {
			w.jsonError(http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("tracekit capture: request body larger than %d bytes", p.cfg.MaxBodyBytes))
			w.closeAfter = true
			return
		}
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, p.cfg.MaxBodyBytes+1))
		if err != nil {
			w.jsonError(http.StatusBadRequest, "invalid_request_error", "tracekit capture: reading the request body: "+err.Error())
			w.closeAfter = true
			return
		}
		if int64(len(body)) > p.cfg.MaxBodyBytes {
			w.jsonError(http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("tracekit capture: request body larger than %d bytes", p.cfg.MaxBodyBytes))
			w.closeAfter = true
			return
		}
	}
	var seg *segment
	if llm && r.Header.Get(ProbeHeader) == "" {
		var err error
		if seg, err = p.segmentFor(arrival); err != nil {
			p.cfg.Logf("capture: %v (request forwarded, not recorded)", err)
			seg = nil
		}
	}
	var ex *exchange
	if seg != nil {
		ex = &exchange{arrival: arrival, stream: p.streams.Get().(*record.Stream)}
		ex.stream.Reset()
	}
	var res fwdResult
	if p.pool != nil {
		res = p.rawForward(w, r, body, buffered, ex)
	} else {
		res = p.rtForward(w, r, body, ex)
	}
	if res.readErr != nil && res.status != 0 {
		w.abort() // the upstream broke off: so does the client's response
	}
	if seg != nil {
		// Parsed here, after the response: nothing on the forwarding path
		// waits for it, and the conversation is matched before the client
		// can send its next turn.
		ex.res = res
		p.account(seg, ex, parseLLMCall(body), r)
	}
}

// isSSE reports whether a response's Content-Type says it is an event
// stream.
func isSSE(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
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

// recorder is what forward does with each piece of body it forwarded:
// parse it now (stamped by the read that brought it), or hand it to a
// decoder in lock step when the body is compressed.
type recorder struct {
	ex    *exchange
	res   *fwdResult
	dec   *decoder
	parse bool
	// late (an event stream an evloop forwards): each piece is only
	// copied into pend as it is forwarded, and parsed with its own stamp
	// later, in bulk, when pend reaches pendMax or the body ends (on the
	// request's goroutine). The loop then forwards a burst of first
	// events without parsing between them.
	late bool
	pend *pending
}

// pending is the pieces of a body not parsed yet: their bytes, and where
// each ends with its read's stamp.
type pending struct {
	b     []byte
	marks []pendMark
}

type pendMark struct {
	end int
	t   int64
}

// pendMax bounds the bytes a recorder holds unparsed.
const pendMax = 4 << 10

var pendPool = sync.Pool{New: func() any { return &pending{b: make([]byte, 0, 2*pendMax)} }}

// init prepares rc for a response body (rc.ex set, nil when it is not
// recorded): sse says it is an event stream, enc is its Content-Encoding.
func (rc *recorder) init(res *fwdResult, sse bool, enc string) {
	rc.res, rc.parse = res, rc.ex != nil
	res.sse = sse
	if enc = strings.ToLower(strings.TrimSpace(enc)); rc.parse && enc != "" && enc != "identity" {
		if decodable(enc) {
			rc.dec = startDecoder(enc, rc.consume)
		} else {
			rc.parse, res.undecoded = false, enc
		}
	}
}

func (rc *recorder) consume(b []byte, t int64) {
	if rc.res.sse {
		rc.ex.stream.Feed(b, t)
	} else if len(rc.res.jsonBody)+len(b) <= maxJSONBody {
		rc.res.jsonBody = append(rc.res.jsonBody, b...)
	}
}

// feed records one forwarded piece.
func (rc *recorder) feed(b []byte, t int64) {
	if !rc.parse || len(b) == 0 {
		return
	}
	switch {
	case rc.dec != nil:
		rc.dec.feed(b, t)
	case rc.late && rc.res.sse && (rc.pend != nil && len(rc.pend.b) > 0 || len(b) < pendMax):
		if rc.pend == nil {
			rc.pend = pendPool.Get().(*pending)
		}
		rc.pend.b = append(rc.pend.b, b...)
		rc.pend.marks = append(rc.pend.marks, pendMark{len(rc.pend.b), t})
		if len(rc.pend.b) >= pendMax {
			rc.flush()
		}
	default:
		rc.consume(b, t)
	}
}

// flush parses the pieces pend holds, in order, each with its own stamp.
func (rc *recorder) flush() {
	if rc.pend == nil {
		return
	}
	start := 0
	for _, m := range rc.pend.marks {
		rc.consume(rc.pend.b[start:m.end], m.t)
		start = m.end
	}
	rc.pend.b, rc.pend.marks = rc.pend.b[:0], rc.pend.marks[:0]
}

// end finishes recording: complete says the body ended as its framing
// said.
func (rc *recorder) end(complete bool, t int64) {
	rc.flush()
	if rc.pend != nil {
		if cap(rc.pend.b) <= 16*pendMax {
			pendPool.Put(rc.pend)
		}
		rc.pend = nil
	}
	if rc.dec != nil {
		rc.res.decodeErr = rc.dec.finish()
		rc.dec = nil
	}
	if rc.parse && complete && !rc.res.sse {
		rc.ex.stream.FeedJSON(rc.res.jsonBody, t)
	}
}

// rawForward is the proxy's own HTTP/1.1 client for a plain-http
// upstream. Each upstream read lands in one buffer and is written to the
// client socket as it is (an HTTP/1.1 upstream's chunked framing passes
// through verbatim; chunkScanner only finds the data in it and the body's
// end), then parsed on the same goroutine: no copy, no allocation and no
// goroutine hop per read. On Linux the evloop reads the response from its
// head on (rawBody.headOnLoop); a head it hands back, and every head
// elsewhere, is parsed by net/http.
func (p *Proxy) rawForward(w *clientWriter, r *http.Request, body []byte, buffered bool, ex *exchange) fwdResult {
	var res fwdResult
	cc := w.cc
	rc := recorder{ex: ex, late: len(p.loops) > 0}
	rb := rawBody{w: w, rc: &rc, res: &res}
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	res.sentNs = clock.Mono()
	head := p.requestHead(r, buffered, len(body))
	var uc *upConn
	var resp *http.Response
	onLoop := false // an evloop read the head and forwarded the response
	for attempt := 0; ; attempt++ {
		var err error
		uc, err = p.pool.get()
		if err != nil {
			res.sendErr, res.doneNs = err, clock.Mono()
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
			res.sendErr, res.clientGone, res.doneNs = err, true, clock.Mono()
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
		res.sendErr, res.doneNs = err, clock.Mono()
		badGateway(w, "upstream unreachable", err)
		return res
	}
	if !onLoop {
		res.headersNs = clock.Mono()
		res.status = resp.StatusCode
		chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
		length := rb.frame(r.Method == http.MethodHead, resp.StatusCode, chunked, resp.ContentLength, resp.Close)
		rc.init(&res, isSSE(resp.Header), resp.Header.Get("Content-Encoding"))
		if err := w.writeHead(resp.StatusCode, resp.Header, length, chunked); err != nil { // forwards what it may
			res.clientGone = true
		}
		rb.pass = chunked && w.mode == bodyRaw && !w.closeAfter // verbatim chunks
		rb.read(uc, *bp)
	}
	complete, reuse, t := rb.complete, rb.reuse, rb.t
	if t == 0 {
		t = clock.Mono()
	}
	res.doneNs = t
	if complete && !res.clientGone {
		if w.finish() != nil {
			res.clientGone = true
		}
	}
	if cc.watch.stop(cc) {
		// abort shut the upstream connection down. A client that hangs up
		// after the whole response reached it did not cut anything: the
		// body's own verdict stands.
		reuse = false
		if !complete {
			res.clientGone = true
			if res.readErr == nil {
				res.readErr = errors.New("the client went away")
			}
		}
	}
	rc.end(complete && res.readErr == nil, t)
	if res.clientGone {
		reuse = false
		if !complete && res.readErr == nil {
			res.readErr = errors.New("the client went away")
		}
	}
	if reuse && complete {
		p.pool.put(uc)
	} else {
		uc.s.close()
	}
	return res
}

// rawBody is the state of one response body being forwarded by
// rawForward.
type rawBody struct {
	w        *clientWriter
	rc       *recorder
	res      *fwdResult
	cs       chunkScanner
	one      [1][]byte
	chunked  bool  // the upstream's body is chunked
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
// and parsed in the callback, which reads again until the socket says
// EAGAIN and only then waits for the poller. (Waiting right after a short
// read would save that read, but a peer's FIN that came with the data
// raises no further readiness edge: an upstream cut mid-body would then
// never be seen.)
func (b *rawBody) read(uc *upConn, buf []byte) {
	if b.complete || b.res.clientGone {
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
		if b.rc.dec == nil && b.viaLoop(rs) {
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
		if b.complete || b.res.clientGone {
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
	if b.complete || b.res.clientGone {
		return false
	}
	b.t = t
	n := len(raw)
	var segs [][]byte
	switch {
	case b.chunked:
		var end int
		var cerr error
		segs, end, b.complete, cerr = b.cs.scan(raw)
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
			b.res.clientGone = true
		}
	}
	for _, s := range segs {
		b.rc.feed(s, t)
	}
	if b.complete || b.res.clientGone {
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
		b.res.readErr, b.reuse = err, false
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
func (p *Proxy) requestHead(r *http.Request, buffered bool, n int) []byte {
	u := *p.upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	b := make([]byte, 0, 512)
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, u.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, p.upstream.Host...)
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
// upstream, or ProxyConfig.Transport) and copies the body to the client as
// it arrives: each read is written before anything else is done with it,
// then parsed.
func (p *Proxy) rtForward(w *clientWriter, r *http.Request, body []byte, ex *exchange) fwdResult {
	var res fwdResult
	cc := w.cc
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := p.upstreamRequest(ctx, r, body)
	if err != nil {
		w.jsonError(http.StatusBadRequest, "invalid_request_error", "tracekit capture: "+err.Error())
		return res
	}
	cc.watch.start(cc, cancel)
	res.sentNs = clock.Mono()
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		res.sendErr, res.doneNs = err, clock.Mono()
		if cc.watch.stop(cc) {
			res.clientGone = true
			return res
		}
		badGateway(w, "upstream unreachable", err)
		return res
	}
	defer resp.Body.Close()
	res.headersNs = clock.Mono()
	res.status = resp.StatusCode
	h := make(http.Header, len(resp.Header))
	copyHeaders(h, resp.Header)
	rc := recorder{ex: ex}
	rc.init(&res, isSSE(resp.Header), resp.Header.Get("Content-Encoding"))
	if err := w.writeHead(resp.StatusCode, h, resp.ContentLength, false); err != nil {
		res.clientGone = true
	}
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	buf := *bp
	complete := false
	var t int64
	for !res.clientGone {
		n, err := resp.Body.Read(buf)
		t = clock.Mono()
		if n > 0 && w.write(buf[:n]) != nil {
			res.clientGone = true
		}
		rc.feed(buf[:n], t)
		if err == io.EOF {
			complete = true
			break
		}
		if err != nil {
			res.readErr = err
			break
		}
	}
	if t == 0 {
		t = clock.Mono()
	}
	res.doneNs = t
	if complete && !res.clientGone && w.finish() != nil {
		res.clientGone = true
	}
	if cc.watch.stop(cc) && !complete {
		res.clientGone = true
	}
	rc.end(complete && res.readErr == nil, t)
	return res
}

func (p *Proxy) upstreamRequest(ctx context.Context, r *http.Request, body []byte) (*http.Request, error) {
	u := *p.upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the upstream request: %w", err)
	}
	copyHeaders(out.Header, r.Header)
	if _, ok := r.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil // Go would add its own
	}
	out.ContentLength = int64(len(body))
	if len(body) == 0 {
		out.Body = http.NoBody
	}
	return out, nil
}

// CheckUpstream asks the upstream for its base URL once, marked as a probe
// (ProbeHeader), through the proxy's transport: any HTTP answer, whatever
// its status, means the upstream is reachable (dial, TLS and HTTP all
// work); the error says what failed otherwise.
func (p *Proxy) CheckUpstream(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.upstream.String(), nil)
	if err != nil {
		return fmt.Errorf("checking upstream %s: %w", p.target, err)
	}
	req.Header.Set(ProbeHeader, "1")
	resp, err := p.rt.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("upstream %s is not reachable: %w", p.target, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return nil
}
