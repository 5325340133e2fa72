package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/trace"
)

// TestProxyCompressedResponses: an upstream that compresses whatever the
// client asked. gzip streams and bodies reach the client byte for byte and
// are recorded like plain ones, each event stamped by the read that
// completed it; an encoding capture cannot decode and a corrupt body are
// recorded as malformed, saying why, never as a stream cut short.
func TestProxyCompressedResponses(t *testing.T) { eachStack(t, testProxyCompressedResponses) }

func testProxyCompressedResponses(t *testing.T, stack h1proxy.Stack) {
	release := make(chan struct{})
	var rawMu sync.Mutex
	raw := map[string][]byte{} // what the upstream sent, by request id
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		var sent bytes.Buffer
		out := io.MultiWriter(w, &sent)
		defer func() {
			rawMu.Lock()
			raw[id] = sent.Bytes()
			rawMu.Unlock()
		}()
		switch id {
		case "gzip-stream":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(out)
			io.WriteString(gz, "data: {\"choices\":[{\"delta\":{\"content\":\"first\"}}]}\n\n")
			gz.Flush()
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
			io.WriteString(gz, "data: {\"choices\":[{\"delta\":{\"content\":\" second\"}}]}\n\n")
			io.WriteString(gz, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
			gz.Close()
		case "gzip-json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(out)
			io.WriteString(gz, `{"choices":[{"message":{"role":"assistant","content":"one body"}}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`)
			gz.Close()
		case "brotli-1", "brotli-2":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(out, "\x1b\x03\x00 not really brotli")
		case "corrupt":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			io.WriteString(out, "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffgarbage that does not inflate")
		}
	}))
	defer up.Close()
	var logMu sync.Mutex
	var logs []string
	ps, _ := startProxy(t, stack, up.URL, func(c *ProxyConfig) {
		c.Logf = func(format string, args ...any) {
			logMu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			logMu.Unlock()
		}
	})
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	send := func(id string, stream bool) *http.Response {
		req, _ := http.NewRequest("POST", ps.URL()+"/v1/chat/completions", strings.NewReader(chatBody([]msg{{"user", id}}, stream)))
		req.Header.Set("X-Request-Id", id)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	got := map[string][]byte{} // what the client received, by request id

	// The stream: the client decodes the first event before the upstream
	// sends the rest.
	resp := send("gzip-stream", true)
	var body bytes.Buffer
	zr, err := gzip.NewReader(io.TeeReader(resp.Body, &body))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(zr)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "first") {
		t.Fatalf("first event: %q %v", line, err)
	}
	close(release)
	if rest, err := io.ReadAll(br); err != nil || !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("rest of the stream: %q %v", rest, err)
	}
	io.Copy(&body, resp.Body)
	resp.Body.Close()
	got["gzip-stream"] = body.Bytes()
	for _, c := range []struct {
		id     string
		stream bool
	}{{"gzip-json", false}, {"brotli-1", true}, {"brotli-2", true}, {"corrupt", true}} {
		resp := send(c.id, c.stream)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", c.id, resp.StatusCode, err)
		}
		got[c.id] = b
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	rawMu.Lock()
	for id, b := range got {
		if !bytes.Equal(b, raw[id]) || len(b) == 0 {
			t.Errorf("%s: the client got %d bytes, the upstream sent %d different ones", id, len(b), len(raw[id]))
		}
	}
	rawMu.Unlock()

	seg := ps.Proxy().Segments()[0]
	recs, _ := readRecordsT(t, seg.Recording)
	byID := map[string]trace.Record{}
	for _, r := range recs {
		byID[r.RequestID] = r
	}
	if r := byID["gzip-stream"]; r.ErrorKind != "" || len(r.EventNs) != 2 || r.EventNs[1] <= r.EventNs[0] || r.CompletionTokens != 2 || r.NonStreaming {
		t.Errorf("gzip stream recorded as %+v; want 2 events from 2 reads, no error", r)
	}
	// The one event is the end of the body, as the recording keeps it.
	if r := byID["gzip-json"]; r.ErrorKind != "" || !r.NonStreaming || len(r.EventNs) != 1 || r.EventNs[0] != trace.StoredEventTime(r.SentNs, r.DoneNs) || r.EventTokens[0] != 5 || !r.TokensExact {
		t.Errorf("gzip body recorded as %+v; want one event of 5 exact tokens at the end", r)
	}
	for _, id := range []string{"brotli-1", "brotli-2"} {
		if r := byID[id]; r.ErrorKind != trace.ErrMalformed || !strings.Contains(r.ErrorMessage, `"br"`) {
			t.Errorf("%s recorded as %+v", id, r)
		}
	}
	if r := byID["corrupt"]; r.ErrorKind != trace.ErrMalformed || !strings.Contains(r.ErrorMessage, "decoding the compressed body") {
		t.Errorf("corrupt gzip recorded as %+v", r)
	}
	answers := map[string]string{}
	for _, row := range readTrace(t, seg.Trace) {
		answers[row.Messages[0].Content] = row.ReferenceAnswer
	}
	if answers["gzip-stream"] != "first second" || answers["gzip-json"] != "one body" {
		t.Errorf("trace answers %q", answers)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], `"br"`) {
		t.Errorf("logs %q; want one warning about br", logs)
	}
}
