package capture

import (
	"os"
	"testing"
)

// TestProxyProbeNotRecorded: a request carrying X-Tracekit-Probe (replay's
// continuous-usage probe) reaches the upstream and its answer the client,
// but neither the trace nor the recording holds it; the files' metadata
// names the host.
func TestProxyProbeNotRecorded(t *testing.T) {
	up := fastMock(t)
	ps, _ := startProxy(t, up.URL(), nil)
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
