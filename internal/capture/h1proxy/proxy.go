package h1proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stack is an implementation of the proxy's HTTP layer. Both forward the
// same headers and body bytes and tell a Tap the same things.
type Stack string

const (
	// Native is the proxy's own HTTP/1.1 server and, for a plain-http
	// upstream, its own client with, on Linux, an epoll event loop that
	// forwards every response body (server.go, conn.go, forward.go,
	// loop_linux.go): tuned to add as little delay per event as it can.
	Native Stack = "native"
	// NetHTTP is net/http's server in front and an http.RoundTripper
	// behind (nethttp.go): the standard library's parsing and connection
	// handling, a goroutine hop or two per read more.
	NetHTTP Stack = "net/http"
)

// ParseStack reads a Stack's name; "" is Native.
func ParseStack(name string) (Stack, error) {
	switch Stack(name) {
	case "", Native:
		return Native, nil
	case NetHTTP:
		return NetHTTP, nil
	}
	return "", fmt.Errorf("proxy stack %q: expected %s or %s", name, Native, NetHTTP)
}

// Config configures a Server.
type Config struct {
	// Upstream is the base URL of the server (http or https); request
	// paths are appended to its path.
	Upstream *url.URL
	// Stack is the HTTP layer (default Native).
	Stack Stack
	// Transport reaches the upstream. Default: for an http:// upstream
	// and the Native stack the proxy's own HTTP/1.1 client (rawForward),
	// otherwise an http.Transport without timeouts on responses (streams
	// are long) and without compression.
	Transport http.RoundTripper
	// InsecureSkipVerify accepts any upstream TLS certificate (default
	// transport only).
	InsecureSkipVerify bool
	// MaxBodyBytes bounds a request body read whole (a watched one, or
	// any an http.RoundTripper sends); default 64 MiB.
	MaxBodyBytes int64
	// Tap is told what is forwarded (nil: nothing is).
	Tap Tap
	// Logf reports proxy-side problems (default: discarded).
	Logf func(format string, args ...any)
}

// Server is a proxy serving on a listener, like httptest.Server: every
// request goes to the upstream untouched, every response back as it
// arrives, each read written to the client at once.
type Server struct {
	f  *forwarder
	ln net.Listener
	s  interface{ shutdown(grace time.Duration) } // the stack's server
}

// Listen listens on addr ("" means a random 127.0.0.1 port) and serves
// there.
func Listen(cfg Config, addr string) (*Server, error) {
	u := cfg.Upstream
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("h1proxy: the upstream must be an http:// or https:// URL with a host")
	}
	stack, err := ParseStack(string(cfg.Stack))
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	f := newForwarder(cfg, stack)
	s := &Server{f: f, ln: ln}
	if stack == NetHTTP {
		s.s = startStd(f, ln)
	} else {
		s.s = startNative(f, ln)
	}
	return s, nil
}

// URL is the proxy's base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Shutdown stops accepting and closes idle client connections at once;
// those with a request in flight end when it does, or are cut once grace
// is up (the tap is told the client went away). Once every exchange has
// ended (End returned), it closes the idle upstream connections; then no
// goroutine of the server is left. A second call does nothing more.
func (s *Server) Shutdown(grace time.Duration) {
	s.s.shutdown(grace)
	s.f.close()
}

// CheckUpstream asks the upstream for its base URL once, with header
// added, through the proxy's http.RoundTripper: any HTTP answer, whatever
// its status, means the upstream is reachable (dial, TLS and HTTP all
// work); the error says what failed otherwise.
func (s *Server) CheckUpstream(ctx context.Context, header http.Header) error {
	f := s.f
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.upstream.String(), nil)
	if err != nil {
		return fmt.Errorf("checking upstream %s: %w", f.upstream.Redacted(), err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := f.rt.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("upstream %s is not reachable: %w", f.upstream.Redacted(), err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return nil
}

// LoopStats counts what the native stack's event loops did.
type LoopStats struct {
	// Bodies is the response bodies the loops forwarded (or began to),
	// Handbacks those a slow client made them hand back to their
	// request's goroutine.
	Bodies, Handbacks int64
	// Heads is the response heads the loops parsed themselves, HeadBacks
	// those they handed back for net/http to parse.
	Heads, HeadBacks int64
}

// LoopStats says what the event loops did so far (all zero without them:
// the NetHTTP stack, or elsewhere than Linux).
func (s *Server) LoopStats() LoopStats {
	st := &s.f.loopStats
	return LoopStats{Bodies: st.bodies.Load(), Handbacks: st.handbacks.Load(), Heads: st.heads.Load(), HeadBacks: st.headBacks.Load()}
}

// forwarder is the upstream side both stacks share: it sends a request on
// and hands its response back.
type forwarder struct {
	upstream *url.URL
	rt       http.RoundTripper
	ownRT    *http.Transport // rt when the proxy made it: its idle connections close with the server
	pool     *upstreamPool   // the proxy's own client (rawForward): Native, a plain-http upstream and no Transport given
	tap      Tap
	maxBody  int64
	logf     func(format string, args ...any)

	bufs sync.Pool // *[]byte read buffers

	// loops forward the bodies of rawForward's responses (loop_linux.go;
	// none elsewhere); close ends them once no handler runs.
	loops     []*evloop
	loopNext  atomic.Uint32
	loopStats loopStats
}

// loopStats counts the bodies the loops took and those a slow client made
// them hand back, and the response heads they parsed and handed back.
type loopStats struct{ bodies, handbacks, heads, headBacks atomic.Int64 }

// numLoops is how many evloops a proxy with its own client runs.
const numLoops = 1

// maxIdleUpstream bounds the idle upstream connections kept for reuse.
const maxIdleUpstream = 4096

func newForwarder(cfg Config, stack Stack) *forwarder {
	f := &forwarder{upstream: cfg.Upstream, rt: cfg.Transport, tap: cfg.Tap, maxBody: cfg.MaxBodyBytes, logf: cfg.Logf}
	if f.maxBody <= 0 {
		f.maxBody = 64 << 20
	}
	if f.logf == nil {
		f.logf = func(string, ...any) {}
	}
	if f.rt == nil {
		f.ownRT = defaultTransport(cfg.InsecureSkipVerify)
		f.rt = f.ownRT
		if stack == NetHTTP {
			// The bound the native client puts on a response head (its
			// https transport keeps net/http's default).
			f.ownRT.MaxResponseHeaderBytes = maxResponseHead
		}
	}
	u := cfg.Upstream
	if stack == Native && cfg.Transport == nil && u.Scheme == "http" {
		port := u.Port()
		if port == "" {
			port = "80"
		}
		f.pool = newUpstreamPool(net.JoinHostPort(u.Hostname(), port), maxIdleUpstream)
		f.loops = newEvloops(numLoops, &f.loopStats)
		if len(f.loops) > 0 {
			f.pool.own = func(c net.Conn) (upSock, error) { return f.loop().own(c) }
		}
	}
	f.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	return f
}

// loop picks the evloop for the next body (round robin), nil if none.
func (f *forwarder) loop() *evloop {
	if len(f.loops) == 0 {
		return nil
	}
	return f.loops[int(f.loopNext.Add(1))%len(f.loops)]
}

// close ends the loops and closes the idle upstream connections; no
// handler may run.
func (f *forwarder) close() {
	for _, l := range f.loops {
		l.close()
	}
	f.loops = nil
	if f.ownRT != nil {
		f.ownRT.CloseIdleConnections() // each idle connection holds two goroutines
	}
	if f.pool != nil {
		f.pool.close()
	}
}

// readBody reads a request's body whole, within max bytes; the status is
// the one to answer with when it could not.
func readBody(r *http.Request, max int64) ([]byte, int, error) {
	tooLarge := fmt.Errorf("request body larger than %d bytes", max)
	if r.ContentLength > max {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
	}
	if int64(len(body)) > max {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	return body, 0, nil
}

// upstreamRequest is r as an http.RoundTripper sends it upstream: the
// upstream's path prefix and host, the client's headers without
// hop-by-hop ones, and body (stream: r.Body as it arrives).
func (f *forwarder) upstreamRequest(ctx context.Context, r *http.Request, body []byte, stream bool) (*http.Request, error) {
	u := *f.upstream
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
	if stream {
		out.Body, out.GetBody, out.ContentLength = r.Body, nil, r.ContentLength
	}
	if out.ContentLength == 0 {
		out.Body = http.NoBody
	}
	return out, nil
}

// isSSE reports whether a response's Content-Type says it is an event
// stream.
func isSSE(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
}

// encoded reports whether a Content-Encoding says the body is encoded.
func encoded(enc string) bool {
	enc = strings.TrimSpace(enc)
	return enc != "" && !strings.EqualFold(enc, "identity")
}

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
