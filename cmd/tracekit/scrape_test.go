package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/capture"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/sweep"
	"github.com/tracekit/tracekit/internal/telemetry"
	"github.com/tracekit/tracekit/trace"
)

// scrapeFixture is a mock whose requests queue (3 batch slots, 8
// conversations at once) and last long against a 50 ms scrape interval,
// with its log in memory, and a trace of 8 conversations of 2 turns.
func scrapeFixture(t *testing.T) (*mock.Server, string) {
	t.Helper()
	srv := mocktest.Start(t, func(c *mock.Config) {
		c.Latency.PrefillBase = mock.Duration(40 * time.Millisecond)
		c.Latency.DecodeBase = mock.Duration(12 * time.Millisecond)
		c.Latency.MaxNumSeqs = 3
	})
	tracePath := filepath.Join(t.TempDir(), "trace.parquet")
	var turns []trace.Turn
	for c := range 8 {
		for k := range 2 {
			turns = append(turns, trace.Turn{ConversationID: fmt.Sprintf("c%d", c), Turn: int32(k), OutputTokens: 16, InputTokens: 5,
				Messages: []trace.Message{{Role: "user", Content: "hello there", Tokens: 5}}})
		}
	}
	if err := trace.WriteTrace(tracePath, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	return srv, tracePath
}

var replayArgs = []string{"--progress", "none", "--model", "tracekit-mock", "--ignore-eos", "--no-probe"}

// netAllowanceMs is what the client's TTFT may exceed the server's by
// beyond the bucket: loopback transfer and the client's read path (the
// client stamps before its write, the server after reading the request).
const netAllowanceMs = 10

// scrapeAllowance widens each scrape's send-read interval when the
// running and waiting counts are rebuilt from the log: the mock moves its
// gauges a few statements before or after the stamps its log records
// (the admission stamp follows the running count's increment, the done
// stamp precedes its decrement by the final write). A loaded machine can
// deschedule the mock between the two for tens of milliseconds (two busy
// loops beside the suite put one past 50 ms), hence half a second; a
// gauge that is wrong, not late, is off for the whole run.
const scrapeAllowance = 500 * time.Millisecond

// replay --scrape against the mock, then analyze: the sidecar is named in
// the recording, the server's TTFT p50 agrees with the client's within the
// histogram bucket (plus the stated network allowance), the running and
// waiting gauges match the mock's log at every scrape, and analyze prints
// the server section in text and JSON.
func TestReplayScrapeMatchesMock(t *testing.T) {
	srv, tr := scrapeFixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "run.parquet")
	args := append([]string{"replay", tr, "--target", srv.URL(), "-o", out, "--no-analyze", "--scrape", "--scrape-interval", "50ms", "--scrape-timeout", "10s"}, replayArgs...)
	stdout, stderr, code := runCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("replay exit %d\n%s\n%s", code, stdout, stderr)
	}
	side := trace.MetricsPath(out)
	recs, meta, err := trace.ReadRecords(out)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Metrics != filepath.Base(side) {
		t.Fatalf("RunMeta.Metrics = %q, want %q", meta.Metrics, filepath.Base(side))
	}
	d, err := telemetry.Read(side)
	if err != nil {
		t.Fatal(err)
	}
	target := telemetry.MetricsURL(srv.URL())
	if d.Meta.StartMonoNs == 0 || d.Meta.StartMonoNs > meta.StartMonoNs {
		t.Fatalf("sidecar zero %d, run start %d: the scraper starts just before the run", d.Meta.StartMonoNs, meta.StartMonoNs)
	}

	// Running and waiting at every scrape, against the log.
	log := srv.Log()
	if len(log) != 16 {
		t.Fatalf("%d log entries", len(log))
	}
	running := func(t int64) int {
		n := 0
		for _, e := range log {
			if e.AdmitMonoNs != 0 && e.AdmitMonoNs <= t && t < e.DoneMonoNs {
				n++
			}
		}
		return n
	}
	waiting := func(t int64) int {
		n := 0
		for _, e := range log {
			end := e.AdmitMonoNs
			if end == 0 {
				end = e.DoneMonoNs
			}
			if e.ArrivalMonoNs <= t && t < end {
				n++
			}
		}
		return n
	}
	// rangeOf is the least and most f takes over [from, to]: at the ends
	// and just before and at every log stamp inside.
	rangeOf := func(f func(int64) int, from, to int64) (lo, hi int) {
		lo, hi = f(from), f(from)
		at := func(t int64) {
			if t >= from && t <= to {
				v := f(t)
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		at(to)
		for _, e := range log {
			for _, s := range []int64{e.ArrivalMonoNs, e.AdmitMonoNs, e.DoneMonoNs} {
				at(s - 1)
				at(s)
			}
		}
		return lo, hi
	}
	valueAt := func(name string, at int64) (float64, bool) {
		ss := d.Find(target, name)
		if len(ss) != 1 {
			t.Fatalf("%s: %d series", name, len(ss))
		}
		for _, p := range ss[0].Points {
			if p.TimeNs == at {
				return p.Value, true
			}
		}
		return 0, false
	}
	maxRun, maxWait, checked := 0.0, 0.0, 0
	for _, sc := range d.ScrapesOf(target, telemetry.All) {
		if !sc.OK {
			t.Fatalf("a scrape of the healthy mock failed: %+v", sc)
		}
		from := d.Meta.StartMonoNs + sc.SentNs - int64(scrapeAllowance)
		to := d.Meta.StartMonoNs + sc.ReadNs + int64(scrapeAllowance)
		for _, g := range []struct {
			name string
			f    func(int64) int
			max  *float64
		}{{"vllm:num_requests_running", running, &maxRun}, {"vllm:num_requests_waiting", waiting, &maxWait}} {
			v, ok := valueAt(g.name, sc.TimeNs)
			if !ok {
				t.Fatalf("%s missing in the scrape at %d", g.name, sc.TimeNs)
			}
			lo, hi := rangeOf(g.f, from, to)
			if v < float64(lo) || v > float64(hi) {
				t.Errorf("scrape at %v: %s = %g, the log says %d..%d over its send-read interval +-%v",
					time.Duration(sc.TimeNs), g.name, v, lo, hi, scrapeAllowance)
			}
			*g.max = max(*g.max, v)
		}
		checked++
	}
	if checked < 10 || maxRun != 3 || maxWait == 0 {
		t.Fatalf("%d scrapes, running at most %g, waiting at most %g: the run did not fill the 3 slots and queue", checked, maxRun, maxWait)
	}

	// analyze: the server section, and the TTFT agreement.
	jsonPath := filepath.Join(dir, "a.json")
	htmlPath := filepath.Join(dir, "a.html")
	text, stderr, code := runCLI(t, "analyze", out, "--json", jsonPath, "--html", htmlPath)
	if code != ExitOK {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Server (scraped /metrics)", target, "Server:                                  vllm", "requests running", "requests waiting", "KV-cache usage (%)", "Generation tokens/s (server):", "ttft     50"} {
		if !strings.Contains(text, want) {
			t.Errorf("analyze output lacks %q:\n%s", want, text)
		}
	}
	var js struct {
		Tracekit struct {
			Server analyze.ServerReport `json:"server"`
		} `json:"tracekit"`
	}
	b, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	sr := js.Tracekit.Server
	if len(sr.Targets) != 1 || sr.Targets[0].Server != "vllm" || sr.Targets[0].Running == nil || sr.Targets[0].Running.Max != 3 {
		t.Fatalf("JSON server section: %+v", sr)
	}
	var ttft *analyze.ServerLatency
	for i, l := range sr.Targets[0].Latency {
		if l.Metric == "ttft" {
			ttft = &sr.Targets[0].Latency[i]
		}
	}
	if ttft == nil || ttft.Observations != 16 || ttft.Client != 16 {
		t.Fatalf("ttft comparison %+v: want the 16 requests on both sides", ttft)
	}
	q := ttft.Quantiles[0]
	if q.P != 50 || q.ServerMs == nil || q.ClientMs == nil || q.BucketLowMs == nil || q.BucketHighMs == nil {
		t.Fatalf("p50: %+v", q)
	}
	// The histogram is the mock's own ground truth: its p50 bucket holds
	// the log's TTFT p50 exactly. The client's p50 sits in that bucket
	// widened by the network allowance plus how late the client saw each
	// first token beyond the mock's write (median over the joined
	// requests): milliseconds when quiet, tens of them on a loaded
	// machine, and a unit or join mistake is off by far more.
	var logTTFT, late []float64
	byID := map[string]trace.Record{}
	for _, r := range recs {
		byID[r.RequestID] = r
	}
	for _, e := range log {
		if len(e.EventMonoNs) == 0 {
			continue
		}
		serverMs := float64(e.EventMonoNs[0]-e.ArrivalMonoNs) / 1e6
		logTTFT = append(logTTFT, serverMs)
		if r, ok := byID[e.RequestID]; ok && len(r.EventNs) > 0 {
			late = append(late, float64(r.EventNs[0]-r.SentNs)/1e6-serverMs)
		}
	}
	slices.Sort(logTTFT)
	slices.Sort(late)
	if len(late) != 16 {
		t.Fatalf("%d requests joined between the recording and the mock's log, want 16", len(late))
	}
	if p50 := trace.Percentile(logTTFT, 50); p50 < *q.BucketLowMs || p50 > *q.BucketHighMs {
		t.Errorf("the mock log's TTFT p50 %.2f ms outside its own histogram's p50 bucket [%.2f, %.2f] ms", p50, *q.BucketLowMs, *q.BucketHighMs)
	}
	allow := netAllowanceMs + max(0, trace.Percentile(late, 50))
	if *q.ClientMs < *q.BucketLowMs-netAllowanceMs || *q.ClientMs > *q.BucketHighMs+allow {
		t.Errorf("client TTFT p50 %.2f ms outside the server's p50 bucket [%.2f, %.2f] ms widened by %d ms (plus the client's median lateness, %.2f ms in all)",
			*q.ClientMs, *q.BucketLowMs, *q.BucketHighMs, netAllowanceMs, allow)
	}
	h, _ := os.ReadFile(htmlPath)
	for _, want := range []string{`id="server-requests"`, `data-series="running"`, `data-series="waiting"`, `id="server-kv"`} {
		if !strings.Contains(string(h), want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
}

// A target without /metrics (404 there) gets a note and the run succeeds;
// a --scrape-url answering bad exposition text is recorded as malformed and
// analyze shows the parser's message naming the line.
func TestReplayScrapeMissingAndMalformed(t *testing.T) {
	_, tr := scrapeFixture(t)
	// A small OpenAI-compatible server of its own, without /metrics.
	noMetrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w%d\"},\"finish_reason\":null}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer noMetrics.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE dcgm_gpu_utilization gauge\ndcgm_gpu_utilization{gpu=\"0\"} 42\nthis line is not a sample\n")
	}))
	defer bad.Close()

	out := filepath.Join(t.TempDir(), "run.parquet")
	args := append([]string{"replay", tr, "--target", noMetrics.URL, "-o", out, "--scrape", "--scrape-url", bad.URL + "/metrics",
		"--scrape-interval", "50ms", "--scrape-timeout", "10s"}, replayArgs...)
	stdout, stderr, code := runCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("replay exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, noMetrics.URL+"/metrics: no metrics endpoint (HTTP 404)") {
		t.Errorf("stderr lacks the 404 note:\n%s", stderr)
	}
	if !strings.Contains(stdout, "(16 requests, 0 errors)") {
		t.Errorf("the run recorded errors: %s", stdout)
	}
	d, err := telemetry.Read(trace.MetricsPath(out))
	if err != nil {
		t.Fatal(err)
	}
	notFound := d.ScrapesOf(noMetrics.URL+"/metrics", telemetry.All)
	if len(notFound) != 1 || notFound[0].ErrorKind != trace.ScrapeNotFound {
		t.Fatalf("404 target: %+v, want one not_found row (not scraped again)", notFound)
	}
	text, stderr, code := runCLI(t, "analyze", out)
	if code != ExitOK {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	for _, want := range []string{"scrape failures: not_found x1", "scrape failures: malformed x", "line 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("analyze output lacks %q:\n%s", want, text)
		}
	}
}

// An existing sidecar is refused without --force (exit 2, nothing sent)
// and replaced with it.
func TestReplayScrapeForce(t *testing.T) {
	srv, tr := scrapeFixture(t)
	out := filepath.Join(t.TempDir(), "run.parquet")
	side := trace.MetricsPath(out)
	if err := os.WriteFile(side, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"replay", tr, "--target", srv.URL(), "-o", out, "--no-analyze", "--scrape", "--max-requests", "2"}, replayArgs...)
	_, stderr, code := runCLI(t, args...)
	if code != ExitUsage || !strings.Contains(stderr, side) {
		t.Fatalf("existing sidecar without --force: exit %d, %s", code, stderr)
	}
	if len(srv.Log()) != 0 {
		t.Fatal("requests were sent")
	}
	if _, _, code := runCLI(t, append(args, "--force")...); code != ExitOK {
		t.Fatalf("with --force: exit %d", code)
	}
	if _, err := telemetry.Read(side); err != nil {
		t.Fatalf("the sidecar was not replaced: %v", err)
	}
}

// sweep --scrape writes one sidecar per step, and the summary carries each
// step's KV-cache usage and queue: the step at 8 users queues on the
// mock's 3 slots, the step at 1 user never does.
func TestSweepScrapePerStep(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	srv, tr := scrapeFixture(t)
	out := filepath.Join(t.TempDir(), "sweep")
	args := []string{"sweep", tr, "--target", srv.URL(), "--out", out, "--max-concurrency", "1,8", "--step-requests", "16",
		"--ignore-eos", "--max-client-lag", "1s", "--max-client-cpu", "1", "--progress-every", "100ms", "--scrape", "--scrape-interval", "50ms", "--scrape-timeout", "10s"}
	stdout, stderr, code := runCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := sweep.ReadSummary(out)
	if err != nil || len(s.Steps) != 2 {
		t.Fatalf("sweep.json: %+v %v", s, err)
	}
	for i, st := range s.Steps {
		sv := st.Server
		if sv == nil || sv.WaitingMax == nil || sv.KVUsageMean == nil || sv.RunningMax == nil {
			t.Fatalf("step %d: server figures %+v", st.Index, sv)
		}
		if _, err := telemetry.Read(filepath.Join(out, sv.Metrics)); err != nil {
			t.Errorf("step %d sidecar %s: %v", st.Index, sv.Metrics, err)
		}
		switch i {
		case 0:
			if *sv.WaitingMax != 0 || *sv.RunningMax != 1 {
				t.Errorf("1 user: waiting max %g, running max %g; want 0 and 1", *sv.WaitingMax, *sv.RunningMax)
			}
		case 1:
			if *sv.WaitingMax == 0 || *sv.RunningMax != 3 {
				t.Errorf("8 users on 3 slots: waiting max %g, running max %g; want > 0 and 3", *sv.WaitingMax, *sv.RunningMax)
			}
		}
	}
	if !strings.Contains(stdout, "server (from each step's /metrics") {
		t.Errorf("sweep table lacks the server block:\n%s", stdout)
	}
	page, _ := os.ReadFile(filepath.Join(out, sweep.SummaryHTML))
	for _, want := range []string{`id="server-kv"`, `id="server-waiting"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("sweep.html lacks %s", want)
		}
	}
}

// capture --scrape: one sidecar for the run, named by every segment's
// recording, which analyze then finds and aligns.
func TestCaptureScrapeOneSidecar(t *testing.T) {
	up, _ := scrapeFixture(t)
	out := t.TempDir()
	f := &scrapeFlags{targets: true, interval: 50 * time.Millisecond, timeout: 10 * time.Second}
	cfg := capture.ProxyConfig{Upstream: up.URL(), OutDir: out, RotateEvery: time.Hour, SyncEvery: time.Second}
	var stderr strings.Builder
	sc := startCaptureScrape(f, &cfg, &stderr)
	if sc == nil || !strings.HasPrefix(cfg.Metrics, "capture-") {
		t.Fatalf("no sidecar: %s", stderr.String())
	}
	ps, err := capture.StartProxy(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		body := fmt.Sprintf(`{"model":"tracekit-mock","messages":[{"role":"user","content":"q%d"}],"stream":true,"max_tokens":5}`, i)
		resp, err := http.Post(ps.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "[DONE]") {
			t.Fatalf("through the proxy: %s", b)
		}
	}
	if err := ps.Shutdown(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	path := sc.finish(&stderr)
	if path != filepath.Join(out, cfg.Metrics) {
		t.Fatalf("sidecar %q, want %s in %s: %s", path, cfg.Metrics, out, stderr.String())
	}
	segs := ps.Proxy().Segments()
	if len(segs) != 1 {
		t.Fatalf("%d segments", len(segs))
	}
	_, meta, err := trace.ReadRecords(segs[0].Recording)
	if err != nil || meta.Metrics != cfg.Metrics {
		t.Fatalf("segment RunMeta.Metrics %q, want %q (%v)", meta.Metrics, cfg.Metrics, err)
	}
	text, stderrA, code := runCLI(t, "analyze", segs[0].Recording)
	if code != ExitOK || !strings.Contains(text, "Server (scraped /metrics)") || !strings.Contains(text, "Server:                                  vllm") {
		t.Fatalf("analyze of a segment: exit %d\n%s\n%s", code, text, stderrA)
	}
	s, err := analyze.Files([]string{segs[0].Recording}, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tt := s.Server.Targets[0]
	var ttft *analyze.ServerLatency
	for i := range tt.Latency {
		if tt.Latency[i].Metric == "ttft" {
			ttft = &tt.Latency[i]
		}
	}
	// Aligned: the window of the segment holds exactly its 3 requests' observations.
	if ttft == nil || ttft.Observations != 3 || ttft.Client != 3 {
		t.Fatalf("ttft over the segment's window: %+v", ttft)
	}
}
