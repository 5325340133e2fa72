package capture

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/trace"
)

// TestProxyProbeNotRecorded: a request carrying X-Tracekit-Probe (replay's
// continuous-usage probe) reaches the upstream and its answer the client,
// but neither the trace nor the recording holds it; the files' metadata
// names the host.
func TestProxyProbeNotRecorded(t *testing.T) { eachStack(t, testProxyProbeNotRecorded) }

func testProxyProbeNotRecorded(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), nil)
	st, _, b := post(t, ps.URL(), "/v1/chat/completions", chatBody([]msg{{"user", "Say hi."}}, true),
		map[string]string{ProbeHeader: "1", "X-Request-Id": "probe"})
	if text, n := sseAnswer(t, b); st != 200 || n == 0 || text == "" {
		t.Fatalf("probe through the proxy: %d, %d events %q", st, n, text)
	}
	st, _, _ = post(t, ps.URL(), "/v1/chat/completions", chatBody([]msg{{"user", "real traffic"}}, true),
		map[string]string{"X-Request-Id": "real"})
	if st != 200 {
		t.Fatalf("status %d", st)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	segs := ps.Proxy().Segments()
	if len(segs) != 1 || segs[0].Requests != 1 {
		t.Fatalf("segments %+v, want one with one request", segs)
	}
	rows := readTrace(t, segs[0].Trace)
	recs, meta := readRecordsT(t, segs[0].Recording)
	if len(rows) != 1 || rows[0].Messages[0].Content != "real traffic" || len(recs) != 1 || recs[0].RequestID != "real" {
		t.Fatalf("trace %+v, records %+v; want only the real request", rows, recs)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skipf("no hostname: %v", err)
	}
	if meta.Host != host {
		t.Fatalf("recording meta host %q, want %q", meta.Host, host)
	}
}

// TestProxyNonStreaming: requests without "stream": true are kept as
// non-streaming turns, and their records hold one event, the body
// completely read, carrying every completion token (from usage).
func TestProxyNonStreaming(t *testing.T) { eachStack(t, testProxyNonStreaming) }

func testProxyNonStreaming(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), nil)
	explicit := `{"model":"tracekit-mock","messages":[{"role":"user","content":"explicit false"}],"stream":false,"max_tokens":8}`
	for id, body := range map[string]string{
		"absent":   chatBody([]msg{{"user", "stream absent"}}, false),
		"explicit": explicit,
		"stream":   chatBody([]msg{{"user", "streaming"}}, true),
	} {
		if st, _, b := post(t, ps.URL(), "/v1/chat/completions", body, map[string]string{"X-Request-Id": id}); st != 200 {
			t.Fatalf("%s: %d %s", id, st, b)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	seg := ps.Proxy().Segments()[0]
	turns := map[string]bool{}
	for _, r := range readTrace(t, seg.Trace) {
		turns[r.Messages[0].Content] = r.NonStreaming
	}
	if len(turns) != 3 || !turns["stream absent"] || !turns["explicit false"] || turns["streaming"] {
		t.Fatalf("trace NonStreaming by message: %v", turns)
	}
	recs, _ := readRecordsT(t, seg.Recording)
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r.ErrorKind != "" || r.Status != 200 {
			t.Fatalf("record %+v", r)
		}
		if r.RequestID == "stream" {
			if r.NonStreaming || len(r.EventNs) < 2 {
				t.Fatalf("streaming record %+v", r)
			}
			continue
		}
		// The one event is the end of the body, as the recording keeps it
		// (to the microsecond).
		at := func(ns int64) int64 { return trace.StoredEventTime(r.SentNs, ns) }
		if !r.NonStreaming || len(r.EventNs) != 1 || r.EventNs[0] != at(r.DoneNs) || r.EventNs[0] < at(r.HeadersNs) {
			t.Fatalf("%s: non-streaming record has events %v (headers %d, done %d), NonStreaming %v; want one event at the end of the body",
				r.RequestID, r.EventNs, r.HeadersNs, r.DoneNs, r.NonStreaming)
		}
		if len(r.EventTokens) != 1 || r.CompletionTokens <= 0 || r.EventTokens[0] != r.CompletionTokens || !r.TokensExact {
			t.Fatalf("%s: event tokens %v, completion %d, exact %v", r.RequestID, r.EventTokens, r.CompletionTokens, r.TokensExact)
		}
	}
}

// TestProxyWarnsUnparsedLLMPaths: Ollama's native endpoints pass through
// untouched, unrecorded, with one warning per path however many requests.
func TestProxyWarnsUnparsedLLMPaths(t *testing.T) { eachStack(t, testProxyWarnsUnparsedLLMPaths) }

func testProxyWarnsUnparsedLLMPaths(t *testing.T, stack h1proxy.Stack) {
	const answer = "{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"done\":false}\n{\"done\":true}\n"
	var mu sync.Mutex
	var upstreamSaw []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		upstreamSaw = append(upstreamSaw, r.URL.Path+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, answer)
	}))
	defer up.Close()
	var logs []string
	ps, _ := startProxy(t, stack, up.URL, func(c *ProxyConfig) {
		c.Logf = func(format string, args ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
	})
	body := `{"model":"llama3","messages":[{"role":"user","content":"hi"}]}`
	for _, path := range []string{"/api/chat", "/api/chat", "/api/generate"} {
		st, _, b := post(t, ps.URL(), path, body, nil)
		if st != 200 || string(b) != answer {
			t.Fatalf("%s through the proxy: %d %q", path, st, b)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(upstreamSaw) != 3 || upstreamSaw[0] != "/api/chat "+body || upstreamSaw[2] != "/api/generate "+body {
		t.Fatalf("upstream saw %q", upstreamSaw)
	}
	count := func(s string) (n int) {
		for _, l := range logs {
			if strings.Contains(l, s) {
				n++
			}
		}
		return n
	}
	if count("POST /api/chat ") != 1 || count("POST /api/generate ") != 1 || len(logs) != 2 {
		t.Fatalf("logs %q; want one warning for each path", logs)
	}
	if segs := ps.Proxy().Segments(); len(segs) != 0 {
		t.Fatalf("unparsed traffic was recorded: %+v", segs)
	}
}

// TestProxyNeverReplacesFiles: files of an earlier run under the names this
// run would use (same second, or a killed run's journal) stay untouched;
// the segment takes the next free name and says so.
func TestProxyNeverReplacesFiles(t *testing.T) { eachStack(t, testProxyNeverReplacesFiles) }

func testProxyNeverReplacesFiles(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	var mu sync.Mutex
	var logs []string
	ps, dir := startProxy(t, stack, up.URL(), func(c *ProxyConfig) {
		c.Logf = func(format string, args ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
	})
	base := filepath.Join(dir, "capture-"+ps.Proxy().stamp+"-0001")
	earlier := map[string]string{
		base + ".recording.parquet":           "an earlier run's recording",
		base + "-2.trace.parquet.journal":     "a killed run's trace journal",
		base + "-3.recording.parquet.journal": "a killed run's recording journal",
	}
	for p, content := range earlier {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if st, _, _ := post(t, ps.URL(), "/v1/chat/completions", chatBody([]msg{{"user", "hello"}}, true), nil); st != 200 {
		t.Fatalf("status %d", st)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	for p, content := range earlier {
		if b, err := os.ReadFile(p); err != nil || string(b) != content {
			t.Fatalf("%s: %q %v; the earlier file was touched", p, b, err)
		}
	}
	segs := ps.Proxy().Segments()
	if len(segs) != 1 || segs[0].Trace != base+"-4.trace.parquet" || segs[0].Recording != base+"-4.recording.parquet" {
		t.Fatalf("segments %+v, want the files named %s-4.*", segs, base)
	}
	if rows := readTrace(t, segs[0].Trace); len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	if recs, _ := readRecordsT(t, segs[0].Recording); len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	for _, leftover := range []string{segs[0].Trace + ".journal", segs[0].Trace + ".partial", segs[0].Recording + ".journal", segs[0].Recording + ".partial"} {
		if _, err := os.Lstat(leftover); err == nil {
			t.Fatalf("%s left behind", leftover)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], filepath.Base(base)+"-4") {
		t.Fatalf("logs %q; want one line naming the name taken", logs)
	}
}
