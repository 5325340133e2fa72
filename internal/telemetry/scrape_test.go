package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// hangGuard bounds every wait: far beyond any healthy run, it only turns a
// hang into a failure.
const hangGuard = 30 * time.Second

// waitFor polls cond until it holds or the hang guard expires.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopWithin calls s.Stop and fails if it does not return within the hang
// guard.
func stopWithin(t *testing.T, s *Scraper) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Stop() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatal("Stop did not return")
		return nil
	}
}

func statusRows(rows []trace.MetricSample, target string) []trace.MetricSample {
	var out []trace.MetricSample
	for _, r := range rows {
		if r.Type == trace.MetricScrape && r.Target == target {
			out = append(out, r)
		}
	}
	return out
}

// tee writes to every sink.
type tee []Sink

func (t tee) Write(rows ...trace.MetricSample) error {
	for _, s := range t {
		if err := s.Write(rows...); err != nil {
			return err
		}
	}
	return nil
}

// completion sends one streaming request to the mock and reads it whole.
func completion(t *testing.T, base string) {
	t.Helper()
	body := `{"model":"tracekit-mock","prompt":"hello there","max_tokens":12,"stream":true}`
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("mock answered %d: %s", resp.StatusCode, b)
	}
}

func TestScrapeMock(t *testing.T) {
	srv := mocktest.Start(t, nil)
	start := clock.Mono()
	runClock := func() int64 { return clock.Mono() - start }
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.parquet")
	mem := &Memory{}
	o := Options{Endpoints: []string{MetricsURL(srv.URL() + "/v1")}, Interval: 50 * time.Millisecond, Timeout: hangGuard, Clock: runClock}
	w, err := trace.NewMetricsWriter(trace.MetricsPath(rec), MetricsMeta(o, trace.RunMeta{StartMonoNs: start, StartWallNs: clock.Wall()}, rec))
	if err != nil {
		t.Fatal(err)
	}
	o.Sink = tee{mem, w}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	target := srv.URL() + "/metrics"
	if got := s.Endpoints(); len(got) != 1 || got[0] != target {
		t.Fatalf("Endpoints() = %v, want [%s]", got, target)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a first scrape", func() bool { return len(statusRows(mem.Rows(), target)) >= 1 })
	completion(t, srv.URL())
	n := len(statusRows(mem.Rows(), target))
	waitFor(t, "three scrapes after the request", func() bool { return len(statusRows(mem.Rows(), target)) >= n+3 })
	if err := stopWithin(t, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rows := mem.Rows()
	st := statusRows(rows, target)
	var prev int64 = -1
	for i, r := range st {
		if r.ErrorKind != trace.ScrapeOK || r.Value != 1 || r.Status != 200 {
			t.Errorf("scrape %d of a healthy mock failed: %+v", i, r)
		}
		if r.SentNs > r.ReadNs || r.TimeNs != r.SentNs+(r.ReadNs-r.SentNs)/2 {
			t.Errorf("scrape %d stamps: sent %d read %d time %d", i, r.SentNs, r.ReadNs, r.TimeNs)
		}
		if r.SentNs <= prev {
			t.Errorf("scrape %d sent at %d, not after the previous one (%d)", i, r.SentNs, prev)
		}
		prev = r.SentNs
	}
	// Every scrape has the vLLM gauges, in time order, with the model label.
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:generation_tokens_total", "vllm:prefix_cache_queries_total"} {
		var times []int64
		for _, r := range rows {
			if r.Name == name {
				times = append(times, r.TimeNs)
				if len(r.Labels) != 1 || r.Labels[0] != (trace.Label{Name: "model_name", Value: "tracekit-mock"}) {
					t.Errorf("%s labels = %v", name, r.Labels)
				}
			}
		}
		if len(times) != len(st) {
			t.Errorf("%s: %d samples in %d scrapes", name, len(times), len(st))
		}
		for i := 1; i < len(times); i++ {
			if times[i] <= times[i-1] {
				t.Errorf("%s: sample %d at %d not after %d", name, i, times[i], times[i-1])
			}
		}
	}
	// The summary layer, over the file written beside the recording.
	d, err := Read(trace.MetricsPath(rec))
	if err != nil {
		t.Fatal(err)
	}
	if d.Meta.Recording != "run.parquet" || len(d.Meta.Endpoints) != 1 || d.Meta.IntervalNs != int64(50*time.Millisecond) || d.Meta.StartMonoNs != start {
		t.Errorf("sidecar meta = %+v", d.Meta)
	}
	sum := SummarizeTarget(d, target, All)
	if sum.Server != "vllm" || sum.Scrapes != len(st) || sum.Failed != 0 {
		t.Errorf("summary: server %q, %d scrapes (%d failed), want vllm, %d, 0", sum.Server, sum.Scrapes, sum.Failed, len(st))
	}
	stats := srv.Stats()
	if !sum.GenerationTokens.OK || sum.GenerationTokens.Increase != float64(stats.GenerationTokens) {
		t.Errorf("generation tokens increase %+v, the mock generated %d", sum.GenerationTokens, stats.GenerationTokens)
	}
	if !sum.Running.OK || sum.Running.N != len(st) || sum.Running.Last != 0 {
		t.Errorf("running gauge %+v over %d scrapes", sum.Running, len(st))
	}
	if sum.Used["Running"] != "vllm:num_requests_running" {
		t.Errorf("Used = %v", sum.Used)
	}
}

// hostile serves the misbehaving endpoints of the scraper tests.
type hostile struct {
	*httptest.Server
	release chan struct{}
	slowIn  atomic.Int64
	mu      sync.Mutex
	headers []http.Header // of /ok requests
}

const secret = "s3cr3t-token"

func newHostile(t *testing.T) *hostile {
	h := &hostile{release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/gone", http.NotFound)
	mux.HandleFunc("/bad", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, "# TYPE a gauge\na 1\nb{x=\"1\" 2\n")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		h.slowIn.Add(1)
		select {
		case <-r.Context().Done():
		case <-h.release:
		}
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded, token="+secret, http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		io.WriteString(w, "# TYPE up gauge\nup 1\n")
	})
	h.Server = httptest.NewServer(mux)
	t.Cleanup(func() { h.Close() })
	t.Cleanup(func() { close(h.release) })
	return h
}

func TestScrapeHostile(t *testing.T) {
	h := newHostile(t)
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/metrics"
	ln.Close()

	u := strings.Replace(h.URL, "http://", "http://user:"+secret+"@", 1)
	eps := map[string]string{
		"gone": h.URL + "/gone", "bad": h.URL + "/bad", "slow": h.URL + "/slow", "fail": h.URL + "/fail",
		"ok": u + "/ok?token=" + secret, "refused": refused,
	}
	var list []string
	for _, e := range eps {
		list = append(list, e)
	}
	mem := &Memory{}
	interval := 40 * time.Millisecond
	// The endpoints that answer get a timeout no loaded machine reaches;
	// the one that never answers gets a short one, on its own scraper (the
	// timeout is per scraper). Both write to one sink.
	var quick []string
	for _, e := range list {
		if e != eps["slow"] {
			quick = append(quick, e)
		}
	}
	s, err := New(Options{Endpoints: quick, Interval: interval, Timeout: hangGuard, Sink: mem,
		Header: http.Header{"Authorization": {"Bearer " + secret}}})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := New(Options{Endpoints: []string{eps["slow"]}, Interval: interval, Timeout: interval / 2, Sink: mem})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := slow.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	count := func(name string) int { return len(statusRows(mem.Rows(), Redact(eps[name]))) }
	for _, name := range []string{"bad", "slow", "fail", "ok", "refused"} {
		waitFor(t, "three scrapes of "+name, func() bool { return count(name) >= 3 })
	}
	if err := stopWithin(t, s); err != nil {
		t.Fatal(err)
	}
	if err := stopWithin(t, slow); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	rows := mem.Rows()

	// No credential anywhere in what was recorded.
	for _, r := range rows {
		for _, f := range []string{r.Target, r.ErrorMessage, r.Name} {
			if strings.Contains(f, secret) {
				t.Fatalf("secret recorded: %+v", r)
			}
		}
	}
	if Redact(eps["ok"]) != h.URL+"/ok" {
		t.Errorf("Redact(%q) = %q", eps["ok"], Redact(eps["ok"]))
	}
	// The requests were probes, with the caller's header and basic auth.
	h.mu.Lock()
	hdr := h.headers[0]
	h.mu.Unlock()
	if hdr.Get(ProbeHeader) != "1" || hdr.Get("Authorization") != "Bearer "+secret || !strings.HasPrefix(hdr.Get("Accept"), "text/plain;version=0.0.4") {
		t.Errorf("request headers %v", hdr)
	}

	want := map[string]string{"bad": trace.ScrapeMalformed, "slow": trace.ScrapeTimeout, "fail": trace.ScrapeHTTPStatus,
		"refused": trace.ScrapeConnect, "gone": trace.ScrapeNotFound, "ok": trace.ScrapeOK}
	for name, kind := range want {
		st := statusRows(rows, Redact(eps[name]))
		for _, r := range st {
			if r.ErrorKind != kind {
				t.Errorf("%s: status row %+v, want kind %q", name, r, kind)
			}
			if (kind == trace.ScrapeOK) != (r.Value == 1) {
				t.Errorf("%s: up value %v with kind %q", name, r.Value, kind)
			}
		}
		// The scraper keeps its interval whatever the endpoint does: no
		// more scrapes than ticks (plus the first, plus one in flight).
		if max := int(elapsed/interval) + 2; len(st) > max {
			t.Errorf("%s: %d scrapes in %v at %v intervals (at most %d)", name, len(st), elapsed, interval, max)
		}
	}
	// A 404 is noted once and not retried.
	if g := statusRows(rows, h.URL+"/gone"); len(g) != 1 || g[0].Status != 404 || !strings.Contains(g[0].ErrorMessage, "not scraped again") {
		t.Errorf("404 endpoint: %+v", g)
	}
	// Bad exposition names its line.
	if b := statusRows(rows, h.URL+"/bad"); !strings.Contains(b[0].ErrorMessage, "line 3") {
		t.Errorf("bad exposition message %q does not name line 3", b[0].ErrorMessage)
	}
	if f := statusRows(rows, h.URL+"/fail"); f[0].Status != 503 || f[0].ErrorMessage != "GET "+h.URL+"/fail: HTTP 503 Service Unavailable" {
		t.Errorf("503 row %+v", f[0])
	}
	// The ok endpoint's sample rows sit beside its status rows.
	var ups int
	for _, r := range rows {
		if r.Name == "up" && r.Target == h.URL+"/ok" {
			ups++
		}
	}
	if ups != count("ok") {
		t.Errorf("%d samples of up in %d scrapes", ups, count("ok"))
	}
	stats := s.Stats()
	for _, st := range stats {
		if st.Target == h.URL+"/gone" && !st.Gone {
			t.Errorf("stats of the 404 endpoint: %+v", st)
		}
	}
}

func TestStartWaitsForTheBaselineAndStopCancels(t *testing.T) {
	h := newHostile(t)
	mem := &Memory{}
	// A timeout and interval far longer than the test: only Stop ends the scrape.
	s, err := New(Options{Endpoints: []string{h.URL + "/slow"}, Interval: time.Hour, Timeout: time.Hour, Sink: mem})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- s.Start(context.Background()) }()
	waitFor(t, "the scrape to reach the server", func() bool { return h.slowIn.Load() == 1 })
	// Start waits for its first scrape: the run's baseline.
	select {
	case err := <-started:
		t.Fatalf("Start returned (%v) while its first scrape is stuck in the handler", err)
	default:
	}
	if len(mem.Rows()) != 0 {
		t.Fatalf("rows before the scrape ended: %v", mem.Rows())
	}
	if err := stopWithin(t, s); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Start did not return after Stop")
	}
	if err := s.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
	// A scrape cut by Stop is not a server failure: nothing recorded.
	if rows := mem.Rows(); len(rows) != 0 {
		t.Errorf("Stop recorded %v", rows)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestScrapeOnceAndOpenMetrics(t *testing.T) {
	var accept atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept.Store(r.Header.Get("Accept"))
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		if r.URL.Path == "/bad" {
			io.WriteString(w, "# TYPE foo counter\nfoo_total 3\nfoo_total{ 4\n# EOF\n")
			return
		}
		io.WriteString(w, "# TYPE foo counter\nfoo_total{b=\"2\",a=\"1\"} 3\n"+
			"# TYPE lat histogram\nlat_bucket{le=\"0.5\"} 1\nlat_bucket{le=\"1.0\"} 4\nlat_bucket{le=\"+Inf\"} 5\nlat_count 5\nlat_sum 3.5\n# EOF\n")
	}))
	defer srv.Close()
	mem := &Memory{}
	s, err := New(Options{Endpoints: []string{srv.URL + "/metrics", srv.URL + "/bad"}, Timeout: hangGuard, Sink: mem, OpenMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ScrapeOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, _ := accept.Load().(string); !strings.HasPrefix(a, "application/openmetrics-text") {
		t.Errorf("Accept %q does not ask for OpenMetrics", a)
	}
	rows := mem.Rows()
	var got []string
	for _, r := range rows {
		if r.Target != srv.URL+"/metrics" {
			continue
		}
		l := ""
		for _, x := range r.Labels {
			l += x.Name + "=" + x.Value + ","
		}
		got = append(got, r.Type+" "+r.Family+" "+r.Name+"{"+l+"} "+FormatBound(r.Value))
	}
	want := []string{
		"scrape  tracekit_scrape{} 1",
		"counter foo_total foo_total{a=1,b=2,} 3",
		"histogram lat lat_bucket{le=0.5,} 1",
		"histogram lat lat_bucket{le=1,} 4",
		"histogram lat lat_bucket{le=+Inf,} 5",
		"histogram lat lat_sum{} 3.5",
		"histogram lat lat_count{} 5",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	bad := statusRows(rows, srv.URL+"/bad")
	if len(bad) != 1 || bad[0].ErrorKind != trace.ScrapeMalformed || !strings.Contains(bad[0].ErrorMessage, "line 3") || !strings.Contains(bad[0].ErrorMessage, "OpenMetrics") {
		t.Errorf("bad OpenMetrics: %+v", bad)
	}
}

func TestParseTextKeepsSeriesWhole(t *testing.T) {
	var p page
	body := "# TYPE s summary\ns{quantile=\"0.5\",z=\"q\"} 1.5\ns{quantile=\"0.99\",z=\"q\"} 9\ns_sum{z=\"q\"} 20\ns_count{z=\"q\"} 10\n" +
		"u 7\n"
	if err := p.parse([]byte(body), http.Header{"Content-Type": {"text/plain; version=0.0.4"}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.rows[1:] {
		l := ""
		for _, x := range r.Labels {
			l += x.Name + "=" + x.Value + ","
		}
		got = append(got, r.Type+" "+r.Name+"{"+l+"} "+FormatBound(r.Value))
	}
	want := "summary s{quantile=0.5,z=q,} 1.5\nsummary s{quantile=0.99,z=q,} 9\nsummary s_sum{z=q,} 20\nsummary s_count{z=q,} 10\nuntyped u{} 7"
	if strings.Join(got, "\n") != want {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}

func TestNewRejects(t *testing.T) {
	for _, o := range []Options{
		{Endpoints: []string{"http://x/metrics"}},
		{Sink: &Memory{}},
		{Sink: &Memory{}, Endpoints: []string{"ftp://x/metrics"}},
		{Sink: &Memory{}, Endpoints: []string{"http://x/metrics"}, Interval: -1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if got := MetricsURL("http://h:8000/v1/"); got != "http://h:8000/metrics" {
		t.Errorf("MetricsURL = %q", got)
	}
}
