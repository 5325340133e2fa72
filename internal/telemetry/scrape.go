package telemetry

import (
	"bytes"
	"context"
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

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// Sink receives the rows of one scrape at a time: its status row first,
// then its samples. Write must not keep rows (or their Labels) after it
// returns: the scraper reuses that memory. *trace.MetricsWriter is a Sink.
type Sink interface {
	Write(rows ...trace.MetricSample) error
}

var (
	_ Sink = (*trace.MetricsWriter)(nil)
	_ Sink = (*Memory)(nil)
)

// Memory is a Sink that keeps copies of the rows, for tests and short runs.
type Memory struct {
	mu   sync.Mutex
	rows []trace.MetricSample
}

// Write copies rows.
func (m *Memory) Write(rows ...trace.MetricSample) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rows {
		r.Labels = append([]trace.Label(nil), r.Labels...)
		m.rows = append(m.rows, r)
	}
	return nil
}

// Rows returns a copy of the rows written so far.
func (m *Memory) Rows() []trace.MetricSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]trace.MetricSample(nil), m.rows...)
}

// Defaults of Options.
const (
	DefaultInterval     = time.Second
	DefaultMaxBodyBytes = 16 << 20
)

// ProbeHeader marks every request tracekit sends that is not traffic; the
// capture proxy forwards such requests but does not record them.
const ProbeHeader = "X-Tracekit-Probe"

// Accept headers: text format 0.0.4 only, or OpenMetrics 1.0 preferred.
// Python's prometheus_client answers OpenMetrics whenever the Accept header
// names it, whatever its q, so it is named only when asked for.
const (
	acceptText        = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
	acceptOpenMetrics = "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)

// Options configure a Scraper.
type Options struct {
	// Endpoints are the metrics URLs to scrape (MetricsURL turns a target
	// base URL into one). Credentials in a URL are sent (as basic auth) but
	// never recorded.
	Endpoints []string
	// Interval between the starts of two scrapes of an endpoint; default
	// DefaultInterval. A scrape that is still running when its next one is
	// due makes that one wait for the tick after (no catch-up bursts).
	Interval time.Duration
	// Timeout bounds one scrape, request to last body byte; default (and
	// at most useful) Interval.
	Timeout time.Duration
	// Client sends the requests; default a client of its own (its own
	// connection pool, nothing shared with replay).
	Client *http.Client
	// Header is added to every request (e.g. Authorization); it is never
	// recorded.
	Header http.Header
	// Clock returns the run's time in ns (monotonic, from the run start);
	// default: time since New.
	Clock func() int64
	// Sink receives the rows; required.
	Sink Sink
	// MaxBodyBytes bounds a page; a larger one is recorded as too_large.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// OpenMetrics asks for OpenMetrics 1.0 before the text format. Either
	// is parsed, by the Content-Type of the answer.
	OpenMetrics bool
}

// MetricsURL is the default metrics endpoint of a target base URL:
// BASE/metrics, with a trailing "/" or "/v1" of BASE removed first (vLLM,
// SGLang and TGI serve /metrics at the root).
func MetricsURL(base string) string {
	base = strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
	return base + "/metrics"
}

// Redact is a URL as recorded: without user info, query or fragment (which
// may carry credentials). An unparsable URL is reduced to "invalid URL".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid URL"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// EndpointStats count one endpoint's scrapes.
type EndpointStats struct {
	Target    string // as recorded
	Scrapes   int64  // status rows written
	Failures  int64  // of which failed
	LastError string // message of the last failure
	Gone      bool   // answered 404: no longer scraped
}

// Scraper polls metrics endpoints on its own goroutines (one per endpoint)
// and writes what they said to a Sink. Nothing it does touches replay's
// connections, locks or goroutines. Create with New, run with Start, end
// with Stop.
type Scraper struct {
	o       Options
	eps     []*endpoint
	accept  string
	timeout time.Duration

	sinkMu  sync.Mutex
	sinkErr error

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// endpoint is one metrics URL and the scratch memory of its scrapes.
type endpoint struct {
	url    string // as given: used for requests only
	target string // as recorded

	mu     sync.Mutex // one scrape at a time (the loop and ScrapeOnce)
	buf    bytes.Buffer
	page   page
	gone   atomic.Bool
	stats  EndpointStats
	statMu sync.Mutex
}

// New checks o and builds a Scraper; nothing runs until Start.
func New(o Options) (*Scraper, error) {
	if o.Sink == nil {
		return nil, errors.New("telemetry: Options.Sink is required")
	}
	if len(o.Endpoints) == 0 {
		return nil, errors.New("telemetry: no endpoints to scrape")
	}
	if o.Interval < 0 || o.Timeout < 0 || o.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("telemetry: negative Interval (%v), Timeout (%v) or MaxBodyBytes (%d)", o.Interval, o.Timeout, o.MaxBodyBytes)
	}
	o = o.withDefaults()
	if o.Client == nil {
		o.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if o.Clock == nil {
		start := clock.Mono()
		o.Clock = func() int64 { return clock.Mono() - start }
	}
	s := &Scraper{o: o, accept: acceptText, timeout: o.Timeout}
	if o.OpenMetrics {
		s.accept = acceptOpenMetrics
	}
	for _, raw := range uniq(o.Endpoints) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("telemetry: endpoint %q: expected an http:// or https:// URL", Redact(raw))
		}
		e := &endpoint{url: raw, target: Redact(raw)}
		e.stats.Target = e.target
		s.eps = append(s.eps, e)
	}
	return s, nil
}

// Endpoints are the metrics URLs as recorded (redacted), in scrape order.
func (s *Scraper) Endpoints() []string {
	out := make([]string, len(s.eps))
	for i, e := range s.eps {
		out[i] = e.target
	}
	return out
}

// MetricsMeta is the sidecar metadata of a run scraped with o (defaults
// applied as New does): the run's start times, the endpoints as recorded,
// the interval and timeout. recording is the recording's path (only its
// base name is kept). It needs no Scraper, so the sidecar writer (o's Sink)
// can be made first.
func MetricsMeta(o Options, run trace.RunMeta, recording string) trace.MetricsMeta {
	o = o.withDefaults()
	m := trace.MetricsMeta{
		TracekitVersion: trace.Version, StartWallNs: run.StartWallNs, StartMonoNs: run.StartMonoNs,
		IntervalNs: int64(o.Interval), TimeoutNs: int64(o.Timeout),
	}
	for _, e := range uniq(o.Endpoints) {
		m.Endpoints = append(m.Endpoints, Redact(e))
	}
	if recording != "" {
		m.Recording = baseName(recording)
	}
	return m
}

func uniq(eps []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range eps {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// withDefaults fills o's zero fields (not Clock, which New starts).
func (o Options) withDefaults() Options {
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout == 0 {
		o.Timeout = o.Interval
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return o
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// Start scrapes every endpoint once and returns when those scrapes are
// recorded (each bounded by the timeout), then goes on every Interval,
// each endpoint on its own goroutine, until Stop or ctx ends. The first
// scrape is the run's baseline: a counter's change over the run is only
// whole when it was read before the first request, which a scrape racing
// the run's start can miss. Calling it twice is an error.
func (s *Scraper) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("telemetry: Scraper started twice")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.mu.Unlock()
	var first sync.WaitGroup
	for _, e := range s.eps {
		first.Go(func() { s.scrape(ctx, e) })
	}
	first.Wait()
	s.mu.Lock() // a Stop during the first scrape has canceled ctx: no loops
	defer s.mu.Unlock()
	if ctx.Err() == nil {
		for _, e := range s.eps {
			s.wg.Add(1)
			go s.loop(ctx, e)
		}
	}
	return nil
}

// Stop cancels scrapes in flight (they are not recorded: the run ended, the
// server did not fail), waits for the goroutines and returns the first error
// the Sink returned, if any. Safe to call more than once, or without Start.
func (s *Scraper) Stop() error {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return s.err()
}

// ScrapeOnce scrapes every endpoint now, concurrently, and returns when all
// are recorded: for a snapshot at the run's end, after Stop. Endpoints that
// answered 404 are skipped. It returns the Sink's error, if any.
func (s *Scraper) ScrapeOnce(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, e := range s.eps {
		wg.Go(func() { s.scrape(ctx, e) })
	}
	wg.Wait()
	return s.err()
}

// Stats returns each endpoint's counts, in Endpoints order.
func (s *Scraper) Stats() []EndpointStats {
	out := make([]EndpointStats, len(s.eps))
	for i, e := range s.eps {
		e.statMu.Lock()
		out[i] = e.stats
		e.statMu.Unlock()
	}
	return out
}

func (s *Scraper) err() error {
	s.sinkMu.Lock()
	defer s.sinkMu.Unlock()
	return s.sinkErr
}

func (s *Scraper) loop(ctx context.Context, e *endpoint) {
	defer s.wg.Done()
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for { // Start took the first scrape
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.scrape(ctx, e) {
			return
		}
	}
}

// scrape does one request of e and records it; false when e is not to be
// scraped again (404, sink failure, or ctx done).
func (s *Scraper) scrape(ctx context.Context, e *endpoint) bool {
	if e.gone.Load() || ctx.Err() != nil || s.err() != nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := s.fetch(ctx, e)
	if !ok {
		return false // canceled by Stop: nothing to record
	}
	if st.kind != trace.ScrapeOK {
		e.page.rows = append(e.page.rows[:0], trace.MetricSample{}) // the status row alone
	}
	rows := e.page.rows // rows[0] is the status row's slot
	rows[0] = trace.MetricSample{
		Name: trace.ScrapeRowName, Type: trace.MetricScrape, Status: st.status,
		ErrorKind: st.kind, ErrorMessage: st.msg,
	}
	if st.kind == trace.ScrapeOK {
		rows[0].Value = 1
	}
	mid := st.sent + (st.read-st.sent)/2
	for i := range rows {
		rows[i].SentNs, rows[i].ReadNs, rows[i].TimeNs, rows[i].Target = st.sent, st.read, mid, e.target
	}
	s.sinkMu.Lock()
	if s.sinkErr == nil {
		if err := s.o.Sink.Write(rows...); err != nil {
			s.sinkErr = fmt.Errorf("telemetry: recording a scrape of %s: %w", e.target, err)
		}
	}
	failed := s.sinkErr != nil
	s.sinkMu.Unlock()

	e.statMu.Lock()
	e.stats.Scrapes++
	if st.kind != trace.ScrapeOK {
		e.stats.Failures++
		e.stats.LastError = st.msg
	}
	if st.kind == trace.ScrapeNotFound {
		e.stats.Gone = true
		e.gone.Store(true)
	}
	e.statMu.Unlock()
	return !failed && !e.gone.Load()
}

// result is what one request gave.
type result struct {
	sent, read int64
	status     int32
	kind, msg  string
}

// fetch requests e's page and parses it into e.page (rows[0] left for the
// status row). ok is false when ctx (the scraper's) ended meanwhile.
func (s *Scraper) fetch(parent context.Context, e *endpoint) (r result, ok bool) {
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()
	bodyRead := false // then a failure keeps the read stamp
	fail := func(kind, format string, args ...any) (result, bool) {
		if !bodyRead {
			r.read = s.o.Clock()
		}
		if parent.Err() != nil {
			return r, false
		}
		r.kind, r.msg = kind, "GET "+e.target+": "+fmt.Sprintf(format, args...)
		return r, true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
	if err != nil {
		r.sent = s.o.Clock()
		return fail(trace.ScrapeConnect, "building the request failed")
	}
	for k, v := range s.o.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", s.accept)
	req.Header.Set(ProbeHeader, "1")
	req.Header.Set("User-Agent", "tracekit/"+trace.Version)

	r.sent = s.o.Clock()
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return s.netFail(ctx, fail, err)
	}
	defer resp.Body.Close()
	r.status = int32(resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fail(trace.ScrapeNotFound, "HTTP 404: no metrics here; not scraped again this run")
	case resp.StatusCode != http.StatusOK:
		return fail(trace.ScrapeHTTPStatus, "HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	e.buf.Reset()
	_, err = e.buf.ReadFrom(io.LimitReader(resp.Body, s.o.MaxBodyBytes+1))
	if err != nil {
		return s.netFail(ctx, fail, err)
	}
	if int64(e.buf.Len()) > s.o.MaxBodyBytes {
		return fail(trace.ScrapeTooLarge, "body larger than %d bytes", s.o.MaxBodyBytes)
	}
	r.read, bodyRead = s.o.Clock(), true
	if err := e.page.parse(e.buf.Bytes(), resp.Header); err != nil {
		return fail(trace.ScrapeMalformed, "%v", err)
	}
	return r, true
}

// netFail classifies a transport error; the message is the cause without
// the URL (Go's url.Error would repeat it with its query).
func (s *Scraper) netFail(ctx context.Context, fail func(string, string, ...any) (result, bool), err error) (result, bool) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
		return fail(trace.ScrapeTimeout, "no complete answer within %v", s.timeout)
	}
	return fail(trace.ScrapeConnect, "%v", err)
}
