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
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/clock"
	"github.com/tracekit/tracekit/record"
	"github.com/tracekit/tracekit/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// ProxyConfig configures a capture Proxy.
type ProxyConfig struct {
	// Upstream is the base URL of the server (http or https); request paths
	// are appended to its path.
	Upstream string
	// OutDir receives one trace and one recording per segment.
	OutDir string
	// SessionHeader, when set, names a request header identifying
	// conversations; requests without it are grouped by message history.
	SessionHeader string
	// RedactContent keeps token counts and no text in the trace.
	RedactContent bool
	// RotateEvery and RotateBytes start a new pair of files after this
	// long or once this much trace text is buffered (default 1 h, 256 MiB):
	// they bound memory and how much a crash can take.
	RotateEvery time.Duration
	RotateBytes int64
	// Tokenizer counts message and answer tokens; default o200k_base.
	Tokenizer tokenizer.Tokenizer
	// Transport reaches the upstream; default: an http.Transport without
	// timeouts on responses (streams are long) and without compression.
	Transport http.RoundTripper
	// InsecureSkipVerify accepts any upstream TLS certificate (default
	// transport only).
	InsecureSkipVerify bool
	// MaxBodyBytes bounds a request body (default 64 MiB).
	MaxBodyBytes int64
	// MaxConversations bounds the histories kept for grouping (default
	// 100,000).
	MaxConversations int
	// SyncEvery and Queue are passed to each segment's record.Recorder.
	SyncEvery time.Duration
	Queue     int
	// Command is recorded in the files' metadata (secrets removed by the
	// caller).
	Command string
	// Logf reports proxy-side problems (default: discarded).
	Logf func(format string, args ...any)
}

// Segment names the pair of files one segment wrote.
type Segment struct {
	Trace, Recording string
	Requests         int
}

// Proxy is an http.Handler that forwards every request to the upstream
// untouched and records the LLM calls among them: a trace turn and a
// recording row each.
type Proxy struct {
	cfg       ProxyConfig
	upstream  *url.URL
	target    string // upstream with credentials removed, for files
	rt        http.RoundTripper
	tok       tokenizer.Tokenizer
	runStart  int64 // mono ns
	wallStart int64
	stamp     string // file name prefix of this run
	host      string // os.Hostname, for the files' metadata

	streams sync.Pool // *record.Stream
	bufs    sync.Pool // *[]byte read buffers

	mu      sync.Mutex
	seg     *segment
	nseg    int
	convs   *conversations
	reqSeq  int64
	convSeq int64
	closed  bool
	files   []Segment
	errs    []error

	warned [len(unparsedLLMPaths)]atomic.Bool // warnUnparsed said so once

	closers sync.WaitGroup // segment-closing goroutines
	stop    chan struct{}  // ends the rotation ticker
	ticker  sync.WaitGroup
}

// NewProxy validates cfg, creates OutDir and returns the proxy. Files are
// created when the first LLM request arrives.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	u, err := url.Parse(cfg.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream %q: expected an http:// or https:// URL with a host", cfg.Upstream)
	}
	if cfg.OutDir == "" {
		return nil, errors.New("capture: an output directory is required")
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	if cfg.RotateEvery <= 0 {
		cfg.RotateEvery = time.Hour
	}
	if cfg.RotateBytes <= 0 {
		cfg.RotateBytes = 256 << 20
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = time.Second
	}
	if cfg.MaxConversations <= 0 {
		cfg.MaxConversations = 100_000
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Tokenizer == nil {
		cfg.Tokenizer = tokenizer.Default()
	}
	rt := cfg.Transport
	if rt == nil {
		rt = &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        0,
			MaxIdleConnsPerHost: 4096,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
			DisableCompression:  true, // pass the client's Accept-Encoding, never add ours
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: cfg.InsecureSkipVerify},
		}
	}
	host, _ := os.Hostname()
	p := &Proxy{
		host: host,
		cfg:  cfg, upstream: u, target: u.Redacted(), rt: rt, tok: cfg.Tokenizer,
		runStart: clock.Mono(), wallStart: clock.Wall(),
		stamp: time.Now().UTC().Format("20060102T150405Z"),
		convs: newConversations(cfg.MaxConversations),
		stop:  make(chan struct{}),
	}
	p.streams.New = func() any { return record.NewStream(cfg.Tokenizer) }
	p.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	p.ticker.Add(1)
	go p.rotateIdle()
	return p, nil
}

// Segments lists the files written so far (complete after Close).
func (p *Proxy) Segments() []Segment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Segment(nil), p.files...)
}

// Close finishes the current segment and waits until every segment's files
// are complete. Stop the HTTP server first (in-flight requests keep their
// segment open until they end).
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
		p.rotateLocked()
	}
	p.mu.Unlock()
	p.ticker.Wait()
	p.closers.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
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

// rotateIdle closes a segment whose time is up even when no request comes,
// and makes the current segment's trace journal durable every SyncEvery.
func (p *Proxy) rotateIdle() {
	defer p.ticker.Done()
	t := time.NewTicker(min(p.cfg.RotateEvery/4+time.Millisecond, p.cfg.SyncEvery))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.seg != nil && p.seg.due(clock.Mono()) {
				p.rotateLocked()
			}
			seg := p.seg
			p.mu.Unlock()
			if seg != nil { // fsync outside p.mu: arrivals never wait on disk
				if err := seg.syncTrace(); err != nil {
					p.cfg.Logf("capture: trace journal of segment %d: %v (the trace is still written at rotation)", seg.n, err)
				}
			}
		}
	}
}

// ServeHTTP forwards r and records it when it is an LLM call.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrival := clock.Mono()
	body, err := io.ReadAll(io.LimitReader(r.Body, p.cfg.MaxBodyBytes+1))
	if err != nil {
		http.Error(w, "tracekit capture: reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if int64(len(body)) > p.cfg.MaxBodyBytes {
		http.Error(w, fmt.Sprintf("tracekit capture: request body larger than %d bytes", p.cfg.MaxBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	out, err := p.upstreamRequest(r, body)
	if err != nil {
		http.Error(w, "tracekit capture: "+err.Error(), http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodPost && !isLLMPath(r.URL.Path) {
		p.warnUnparsed(r.URL.Path)
	}
	if r.Method != http.MethodPost || !isLLMPath(r.URL.Path) || r.Header.Get(ProbeHeader) != "" {
		if res := p.forward(w, out, nil); res.readErr != nil && res.status != 0 {
			panic(http.ErrAbortHandler) // the upstream broke off: so does the client's response
		}
		return
	}
	// Parse the request while the upstream works on it.
	parsed := make(chan *llmCall, 1)
	go func() { parsed <- parseLLMCall(body) }()

	seg, err := p.segmentFor(arrival)
	if err != nil {
		p.cfg.Logf("capture: %v (request forwarded, not recorded)", err)
		<-parsed
		p.forward(w, out, nil)
		return
	}
	ex := &exchange{arrival: arrival, stream: p.streams.Get().(*record.Stream), header: r.Header.Get}
	ex.stream.Reset()
	res := p.forward(w, out, ex)
	call := <-parsed
	ex.res = res
	p.account(seg, ex, call, r)
	if res.readErr != nil && res.status != 0 && !res.clientGone {
		panic(http.ErrAbortHandler)
	}
}

// ProbeHeader marks a request tracekit itself sends that is not traffic
// (replay's continuous-usage probe, a /v1/models lookup, a ready check): the
// proxy forwards it, header included, and never records it.
const ProbeHeader = "X-Tracekit-Probe"

// isLLMPath reports whether path is an OpenAI completion endpoint.
func isLLMPath(path string) bool {
	return strings.HasSuffix(path, "/chat/completions") || strings.HasSuffix(path, "/completions")
}

// unparsedLLMPaths are LLM endpoints the proxy forwards but cannot record
// (their bodies are not OpenAI's), each with whose API it is. Longer
// suffixes come first: the first match names the path.
var unparsedLLMPaths = [...]struct{ suffix, api string }{
	{"/api/chat", "Ollama's native chat API"},
	{"/api/generate", "Ollama's native generate API"},
	{"/generate_stream", "TGI's native API"},
	{"/generate", "TGI's or SGLang's native API"},
	{"/v1/responses", "OpenAI's Responses API"},
	{"/v1/messages", "Anthropic's Messages API"},
}

// warnUnparsed logs, once per known endpoint per proxy, that LLM traffic to
// path passes through unrecorded, so a capture never silently misses it.
func (p *Proxy) warnUnparsed(path string) {
	for i, u := range unparsedLLMPaths {
		if !strings.HasSuffix(path, u.suffix) {
			continue
		}
		if p.warned[i].CompareAndSwap(false, true) {
			p.cfg.Logf("capture: POST %s is LLM traffic in %s, which capture does not parse: forwarded untouched, not recorded "+
				"(send it to the OpenAI-compatible /v1/chat/completions or /v1/completions to capture it; warned once per path)", path, u.api)
		}
		return
	}
}

// hopHeaders are connection-level headers a proxy must not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k][:0:0], vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
	for _, f := range src["Connection"] { // headers the Connection header names
		for _, name := range strings.Split(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
}

func (p *Proxy) upstreamRequest(r *http.Request, body []byte) (*http.Request, error) {
	u := *p.upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the upstream request: %w", err)
	}
	copyHeaders(out.Header, r.Header)
	if _, ok := r.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil // Go would add its own
	}
	out.ContentLength = int64(len(body))
	return out, nil
}

// fwdResult is how one exchange went at the HTTP level.
type fwdResult struct {
	sentNs, headersNs, doneNs int64
	status                    int
	sendErr                   error // no response
	readErr                   error // the upstream body broke off
	clientGone                bool  // writing to the client failed
	sse                       bool
	jsonBody                  []byte // a non-SSE body, bounded, for FeedJSON
}

// exchange is one recorded LLM call in flight.
type exchange struct {
	arrival int64
	stream  *record.Stream
	res     fwdResult
	header  func(string) string
}

// maxJSONBody bounds the non-streaming body kept for parsing.
const maxJSONBody = 16 << 20

// forward sends out upstream and copies the response to w as it arrives:
// each read is written and flushed before anything else is done with it.
// With ex set, each read is then stamped and parsed.
func (p *Proxy) forward(w http.ResponseWriter, out *http.Request, ex *exchange) fwdResult {
	var res fwdResult
	res.sentNs = clock.Mono()
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		res.sendErr, res.doneNs = err, clock.Mono()
		if out.Context().Err() != nil {
			res.clientGone = true
			return res
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		msg, _ := json.Marshal("tracekit capture: upstream unreachable: " + err.Error())
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"upstream_error","code":502}}`, msg)
		return res
	}
	defer resp.Body.Close()
	res.headersNs = clock.Mono()
	res.status = resp.StatusCode
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	rc.Flush()
	ct := resp.Header.Get("Content-Type")
	res.sse = strings.HasPrefix(ct, "text/event-stream")
	parse := ex != nil && (resp.Header.Get("Content-Encoding") == "" || resp.Header.Get("Content-Encoding") == "identity")
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	buf := *bp
	for {
		n, err := resp.Body.Read(buf)
		t := clock.Mono()
		if n > 0 && !res.clientGone {
			if _, werr := w.Write(buf[:n]); werr != nil {
				res.clientGone = true
			} else if ferr := rc.Flush(); ferr != nil {
				res.clientGone = true
			}
		}
		if n > 0 && parse {
			if res.sse {
				ex.stream.Feed(buf[:n], t)
			} else if len(res.jsonBody)+n <= maxJSONBody {
				res.jsonBody = append(res.jsonBody, buf[:n]...)
			}
		}
		if err != nil {
			res.doneNs = t
			if err != io.EOF {
				res.readErr = err
				// The client's going away cancels the upstream request:
				// tell that apart from the upstream breaking off.
				res.clientGone = res.clientGone || out.Context().Err() != nil
			}
			if parse && !res.sse && err == io.EOF {
				ex.stream.FeedJSON(res.jsonBody, t)
			}
			return res
		}
		if res.clientGone {
			// Stop reading: the client went away, and canceling its
			// request context aborts the upstream request.
			res.doneNs = t
			return res
		}
	}
}

// llmCall is what the recording needs from a request body.
type llmCall struct {
	model     string
	messages  []trace.Message
	chat      bool
	maxTokens int32
	// stream is the request's "stream": true; absent or false asks for one
	// JSON body (the OpenAI default).
	stream bool
}

func parseLLMCall(body []byte) *llmCall {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Prompt              json.RawMessage `json:"prompt"`
		MaxTokens           *int32          `json:"max_tokens"`
		MaxCompletionTokens *int32          `json:"max_completion_tokens"`
		Stream              bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil
	}
	c := &llmCall{model: req.Model, chat: req.Messages != nil, stream: req.Stream}
	switch {
	case req.MaxCompletionTokens != nil:
		c.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.maxTokens = *req.MaxTokens
	}
	for _, m := range req.Messages {
		c.messages = append(c.messages, trace.Message{Role: m.Role, Content: contentText(m.Content)})
	}
	if !c.chat {
		c.messages = []trace.Message{{Role: "user", Content: contentText(req.Prompt)}}
	}
	return c
}

// contentText flattens a message content: a string, or an array of parts
// (the text parts are kept), or a prompt array of strings.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, part := range parts {
		var txt struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(part, &s) == nil {
			b.WriteString(s)
		} else if json.Unmarshal(part, &txt) == nil {
			b.WriteString(txt.Text)
		}
	}
	return b.String()
}

// ProxyServer runs a Proxy on a listener, like httptest.Server.
type ProxyServer struct {
	proxy *Proxy
	srv   *http.Server
	ln    net.Listener
	done  chan error
}

// StartProxy listens on addr ("" means a random 127.0.0.1 port) and serves
// a new Proxy there.
func StartProxy(cfg ProxyConfig, addr string) (*ProxyServer, error) {
	p, err := NewProxy(cfg)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	s := &ProxyServer{proxy: p, ln: ln, done: make(chan error, 1),
		srv: &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// URL is the proxy's base URL.
func (s *ProxyServer) URL() string { return "http://" + s.ln.Addr().String() }

// Proxy returns the handler.
func (s *ProxyServer) Proxy() *Proxy { return s.proxy }

// Close stops accepting, lets in-flight requests finish for up to grace
// (then cuts them: they are recorded as canceled), and completes the files.
func (s *ProxyServer) Close() error { return s.Shutdown(5 * time.Second) }

// Shutdown is Close with a chosen grace period.
func (s *ProxyServer) Shutdown(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	<-s.done
	return s.proxy.Close()
}

func timeFromUnixNano(ns int64) time.Time { return time.Unix(0, ns) }
