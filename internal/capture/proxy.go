package capture

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/internal/tokenizer"
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
	// RedactContent keeps token counts and no text in the trace, and
	// each media item as a synthetic one of the same kind, format and
	// shape (no media bytes are kept).
	RedactContent bool
	// RotateEvery and RotateBytes start a new pair of files after this
	// long or once this much trace text is buffered (default 1 h, 256 MiB):
	// they bound memory and how much a crash can take.
	RotateEvery time.Duration
	RotateBytes int64
	// Tokenizer counts message and answer tokens; default o200k_base.
	Tokenizer tokenizer.Tokenizer
	// Stack is the HTTP layer that forwards the traffic (h1proxy): the
	// proxy's own (h1proxy.Native, the default) or net/http's
	// (h1proxy.NetHTTP). Both forward the same headers and
	// body bytes and record the same.
	Stack h1proxy.Stack
	// Transport reaches the upstream. Default: for an http:// upstream and
	// the native stack the proxy's own HTTP/1.1 client, otherwise an
	// http.Transport without timeouts on responses (streams are long) and
	// without compression.
	Transport http.RoundTripper
	// InsecureSkipVerify accepts any upstream TLS certificate (default
	// transport only).
	InsecureSkipVerify bool
	// MaxBodyBytes bounds a request body read whole (an LLM call's;
	// default 64 MiB).
	MaxBodyBytes int64
	// MaxConversations bounds the histories kept for grouping (default
	// 100,000).
	MaxConversations int
	// SyncEvery and Queue are passed to each segment's record.Recorder.
	// Queue (default 1024) also bounds the finished requests whose records
	// are still being counted or wait for the disk; beyond it the next
	// response's end waits.
	SyncEvery time.Duration
	Queue     int
	// Command is recorded in the files' metadata (secrets removed by the
	// caller).
	Command string
	// Logf reports proxy-side problems (default: discarded).
	Logf func(format string, args ...any)
	// Metrics is recorded as every segment's RunMeta.Metrics: the base name of the run's telemetry sidecar in OutDir, if any.
	Metrics string
	// GCPercent is the garbage collector's target (as GOGC) from NewProxy
	// to Close, which restores the previous one. 0 means DefaultGCPercent;
	// a negative value leaves the process's setting alone, and so does a
	// GOGC environment variable.
	GCPercent int
	// Scrub removes secrets from the error messages recorded and the
	// lines logged: it is given the upstream URL's credentials and learns
	// the credential-like headers (Authorization, x-api-key...) of every
	// request forwarded, whose values a hostile upstream may echo. Default
	// a Scrubber of the proxy's own.
	Scrub *redact.Scrubber
	// Tap, when set, sees each recorded call once its recording row is
	// written, on the segment recorder's writer goroutine, never on the
	// forwarding path (a live view's feed). The record's times count from
	// its segment's start, which is segStartNs after the proxy's (Elapsed's
	// clock). Tap must not keep rec and must not wait.
	Tap func(rec *trace.Record, segStartNs int64)
	// syncFile makes a trace journal durable (default (*os.File).Sync);
	// tests slow it down to play a slow disk.
	syncFile func(*os.File) error
}

// DefaultGCPercent is the GOGC a proxy runs with unless told otherwise.
// Every stream in flight holds its connections' buffers and goroutine
// stacks, so at thousands of streams a collection cycle marks tens of MB;
// on a small machine its mark worker and assists take the cores that the
// forwarding reads and writes need, delaying events. A higher target runs
// fewer cycles, for a heap up to that many percent above the live one.
const DefaultGCPercent = 400

// Segment names the pair of files one segment wrote.
type Segment struct {
	Trace, Recording string
	// Media is the trace's media file (trace.MediaPath), "" when the
	// segment stored no media bytes.
	Media    string
	Requests int
	n        int // the segment's number, for the order of Segments
}

// Proxy is the recording side of the proxy: as the h1proxy.Tap of the
// server that forwards the traffic (ProxyServer, StartProxy), it watches
// the LLM calls among the requests and records each: a trace turn and a
// recording row.
type Proxy struct {
	cfg       ProxyConfig
	upstream  *url.URL
	target    string // upstream with credentials removed, for files
	tok       tokenizer.Tokenizer
	runStart  int64 // mono ns
	wallStart int64
	stamp     string // file name prefix of this run
	host      string // os.Hostname, for the files' metadata

	streams sync.Pool // *record.Stream

	mu      sync.Mutex
	seg     *segment
	nseg    int
	convs   *conversations
	reqSeq  int64
	convSeq int64
	closed  bool
	files   []Segment
	errs    []error

	warned      [len(unparsedLLMPaths)]atomic.Bool // warnUnparsed said so once
	parseWarned sync.Map                           // api.Name: a request its parser refused was logged

	closers sync.WaitGroup // segment-closing goroutines
	// acct holds the accounting jobs (one per finished LLM call) for the
	// worker, at most Queue: when it is full (the worker waits on the
	// disk) the next handler waits, so a stalled disk holds back clients
	// instead of queueing records in memory without end.
	acct       chan func()
	acctClosed bool           // under mu
	acctDone   sync.WaitGroup // the worker
	acctStall  atomic.Bool    // logged once
	encWarned  atomic.Bool    // an undecodable Content-Encoding, logged once
	media      *mediaState

	hmu    sync.Mutex
	active int           // exchanges watched (Open to End), under hmu
	idle   chan struct{} // closed when active drops to 0, while Close waits
	stop   chan struct{} // ends the rotation ticker
	ticker sync.WaitGroup

	restoreGC func() // undoes GCPercent, once, in Close
}

// proxyConfigType names ProxyConfig in the *fielderr.Error of a bad
// field: the command line names the flag that set it instead.
const proxyConfigType = "capture.ProxyConfig"

// NewProxy validates cfg, creates OutDir and returns the recording side;
// StartProxy also serves it. Files are created when the first LLM request
// arrives.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	u, err := url.Parse(cfg.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fielderr.Errorf(proxyConfigType, "Upstream", "%s %q: expected an http:// or https:// URL with a host", fielderr.Name("Upstream"), cfg.Upstream)
	}
	if cfg.OutDir == "" {
		return nil, fielderr.Errorf(proxyConfigType, "OutDir", "capture: no %s given", fielderr.Name("OutDir"))
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
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = time.Second
	}
	if cfg.MaxConversations <= 0 {
		cfg.MaxConversations = 100_000
	}
	if cfg.Scrub == nil {
		cfg.Scrub = redact.New()
	}
	cfg.Scrub.AddURL(cfg.Upstream)
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	logf, scrub := cfg.Logf, cfg.Scrub
	cfg.Logf = func(format string, args ...any) { logf("%s", scrub.Scrub(fmt.Sprintf(format, args...))) }
	if cfg.Tokenizer == nil {
		cfg.Tokenizer = tokenizer.Default()
	}
	if _, err := h1proxy.ParseStack(string(cfg.Stack)); err != nil {
		return nil, err
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1024
	}
	host, _ := os.Hostname()
	p := &Proxy{
		host: host,
		cfg:  cfg, upstream: u, target: u.Redacted(), tok: cfg.Tokenizer,
		acct:     make(chan func(), cfg.Queue),
		runStart: clock.Mono(), wallStart: clock.Wall(),
		stamp: time.Now().UTC().Format("20060102T150405Z"),
		convs: newConversations(cfg.MaxConversations),
		media: newMediaState(),
		stop:  make(chan struct{}),
	}
	p.restoreGC = setGC(cfg.GCPercent)
	p.streams.New = func() any { return record.NewStream(cfg.Tokenizer) }
	p.ticker.Add(1)
	go p.rotateIdle()
	p.acctDone.Add(1)
	go p.accountWorker(p.acct)
	return p, nil
}

// Segments lists the files written so far, in segment order (complete
// after Close).
func (p *Proxy) Segments() []Segment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Segment(nil), p.files...)
}

// Close finishes the current segment and waits until every exchange being
// watched has ended and every segment's files are complete; then no
// goroutine of the proxy is left. Stop the server first (in-flight
// requests keep their segment open until they end; ProxyServer.Shutdown
// bounds that wait).
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
		p.rotateLocked()
	}
	p.mu.Unlock()
	p.waitExchanges()
	p.mu.Lock()
	if !p.acctClosed {
		close(p.acct) // no exchange is left to account
		p.acctClosed = true
	}
	p.mu.Unlock()
	p.acctDone.Wait()
	p.ticker.Wait()
	p.closers.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.restoreGC != nil {
		p.restoreGC()
		p.restoreGC = nil
	}
	if n := p.media.skipped.Swap(0); n > 0 {
		p.cfg.Logf("capture: %d media parts of requests were not recorded (given by URL, or bytes no server reads); their turns were recorded without them", n)
	}
	return errors.Join(p.errs...)
}

// setGC applies a GCPercent setting and returns what restores it.
func setGC(gc int) (restore func()) {
	if gc == 0 {
		gc = DefaultGCPercent
	}
	if gc < 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(gc)
	return func() { debug.SetGCPercent(old) }
}

// enter and leave count the exchanges watched (Open to End), for Close.
func (p *Proxy) enter() {
	p.hmu.Lock()
	p.active++
	p.hmu.Unlock()
}

func (p *Proxy) leave() {
	p.hmu.Lock()
	if p.active--; p.active == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.hmu.Unlock()
}

// waitExchanges returns once no exchange is watched.
func (p *Proxy) waitExchanges() {
	p.hmu.Lock()
	if p.active == 0 {
		p.hmu.Unlock()
		return
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	idle := p.idle
	p.hmu.Unlock()
	<-idle
}

// ProbeHeader marks a request tracekit itself sends that is not traffic
// (replay's continuous-usage probe, a /v1/models lookup, a ready check): the
// proxy forwards it, header included, and never records it.
const ProbeHeader = "X-Tracekit-Probe"
