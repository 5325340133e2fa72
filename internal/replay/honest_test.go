package replay

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// runBounded replays cfg with a hang guard and returns what Run returned.
func runBounded(t *testing.T, cfg Config) (*memSink, *Result, error) {
	t.Helper()
	r, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if ctx.Err() != nil {
		t.Fatalf("the run hung until the test's 30 s guard: %v", err)
	}
	return sink, res, err
}

// A server that reads the request and never sends headers: --idle-timeout
// bounds the wait, and the record says what happened.
func TestNoHeadersBoundedByIdleTimeout(t *testing.T) {
	srv := startHostile(t, &hostileServer{noHeaders: true})
	path := writeTrace(t, conv("a", 2, 0, 0, 3))
	sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m", IdleTimeout: 300 * time.Millisecond})
	if err != nil || res.Sent != 2 || res.Errors != 2 {
		t.Fatalf("run: %v %+v", err, res)
	}
	for _, r := range sink.Records() {
		if r.ErrorKind != trace.ErrHeadersTimeout || r.ErrorMessage != "no response headers within 300ms (--idle-timeout)" || r.HeadersNs != 0 {
			t.Errorf("%s: %q %q headers %d", r.RequestID, r.ErrorKind, r.ErrorMessage, r.HeadersNs)
		}
	}
}

// encoders compress a stream the way a server flushing per event does.
var encoders = map[string]func(io.Writer) (io.Writer, func() error, func() error){
	"gzip": func(w io.Writer) (io.Writer, func() error, func() error) {
		z := gzip.NewWriter(w)
		return z, z.Flush, z.Close
	},
	"deflate": func(w io.Writer) (io.Writer, func() error, func() error) {
		z := zlib.NewWriter(w)
		return z, z.Flush, z.Close
	},
	"zstd": func(w io.Writer) (io.Writer, func() error, func() error) {
		z, _ := zstd.NewWriter(w)
		return z, z.Flush, z.Close
	},
	"br": func(w io.Writer) (io.Writer, func() error, func() error) {
		z := brotli.NewWriter(w)
		return z, z.Flush, z.Close
	},
}

// compressedAnswer is sseAnswer's stream compressed with enc, one chunk
// per flushed event.
func compressedAnswer(enc string) func(w *bufio.Writer, req *http.Request, _ []byte) {
	return func(w *bufio.Writer, req *http.Request, _ []byte) {
		fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: %s\r\nTransfer-Encoding: chunked\r\n\r\n", enc)
		var chunk bytes.Buffer
		z, flush, closeZ := encoders[enc](&chunk)
		emit := func() {
			if chunk.Len() > 0 {
				fmt.Fprintf(w, "%x\r\n%s\r\n", chunk.Len(), chunk.Bytes())
				w.Flush()
				chunk.Reset()
			}
		}
		for i := range 3 {
			fmt.Fprintf(z, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d}}\n\n", i, i+1)
			flush()
			emit()
		}
		fmt.Fprint(z, "data: [DONE]\n\n")
		closeZ()
		emit()
		fmt.Fprint(w, "0\r\n\r\n")
	}
}

// replay asks for Accept-Encoding: identity; a server that compresses
// anyway is decoded (gzip, deflate, zstd, br), and one with an encoding
// replay cannot decode fails naming Content-Encoding.
func TestCompressedStreams(t *testing.T) {
	path := writeTrace(t, conv("a", 2, 0, 0, 3))
	for enc := range encoders {
		t.Run(enc, func(t *testing.T) {
			srv := startHostile(t, &hostileServer{respond: compressedAnswer(enc)})
			sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m", ContinuousUsage: "on"})
			if err != nil || res.Errors != 0 {
				t.Fatalf("run: %v %+v %v", err, res, sink.Records())
			}
			for _, r := range sink.Records() {
				if len(r.EventNs) != 3 || !r.TokensExact || r.CompletionTokens != 3 || r.EventNs[0] < r.HeadersNs {
					t.Errorf("%s: %+v", r.RequestID, r)
				}
			}
			for _, q := range srv.seen() {
				if q.acceptEncoding != "identity" {
					t.Errorf("%s %s: Accept-Encoding %q, want identity", q.method, q.path, q.acceptEncoding)
				}
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		srv := startHostile(t, &hostileServer{respond: func(w *bufio.Writer, _ *http.Request, _ []byte) {
			fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: compress\r\nContent-Length: 4\r\n\r\n\x1f\x9d\x90\x00")
		}})
		sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m"})
		if err != nil || res.Errors != 2 {
			t.Fatalf("run: %v %+v", err, res)
		}
		for _, r := range sink.Records() {
			if r.ErrorKind != trace.ErrMalformed || !strings.Contains(r.ErrorMessage, "Content-Encoding: compress") {
				t.Errorf("%s: %q %q", r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
		}
	})
}

// jsonAnswer answers one JSON completion where a stream was asked for.
func jsonAnswer(w *bufio.Writer, _ *http.Request, _ []byte) {
	b := `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`
	fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
}

// A JSON body where a stream was asked for is "server answered without
// streaming", not "0 events without data: [DONE]"; the probe finds it
// before the run.
func TestJSONWhereStreamAsked(t *testing.T) {
	path := writeTrace(t, conv("a", 2, 0, 0, 3))
	srv := startHostile(t, &hostileServer{respond: jsonAnswer})
	sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m", NoProbe: true})
	if err != nil || res.Errors != 2 {
		t.Fatalf("run: %v %+v", err, res)
	}
	for _, r := range sink.Records() {
		if r.ErrorKind != trace.ErrNotStreaming || !strings.HasPrefix(r.ErrorMessage, "server answered without streaming (Content-Type: application/json)") {
			t.Errorf("%s: %q %q", r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
	}

	srv2 := startHostile(t, &hostileServer{respond: jsonAnswer, respondProbes: true})
	_, res, err = runBounded(t, Config{Trace: path, Targets: []string{srv2.url()}, Model: "m"})
	if err == nil || !strings.Contains(err.Error(), "without streaming") || res != nil {
		t.Errorf("probe against a JSON server: %v %+v; want the run to fail before it starts", err, res)
	}
}

// A wrong --model (the mock answers vLLM's 404) and a dead target fail the
// run before its clock starts, with the real cause, and nothing is
// recorded.
func TestBadModelAndDeadTargetFailBeforeTheClock(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.StrictModel = true })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	path := writeTrace(t, conv("a", 2, 0, 0, 3))
	for _, tc := range []struct {
		name, target, model, want string
	}{
		{"model", srv.URL(), "no-such-model", "HTTP 404"},
		{"dead", dead, "m", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{tc.target}, Model: tc.model, ContinuousUsage: "off"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || res != nil || len(sink.Records()) != 0 || sink.RunMeta().StartMonoNs != 0 {
				t.Errorf("err %v, result %+v, %d records; want %q before the clock starts", err, res, len(sink.Records()), tc.want)
			}
		})
	}
}

// --continuous-usage auto verifies: a server that accepts the field and
// sends no usage with its events (Ollama) is not trusted, the run does not
// ask for it, and the run metadata says why; the mock, which honours it,
// is.
func TestContinuousUsageAutoVerifies(t *testing.T) {
	path := writeTrace(t, conv("a", 2, 0, 0, 3))
	srv := startHostile(t, &hostileServer{respond: noUsageAnswer, respondProbes: true})
	sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m"})
	if err != nil || res.Errors != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	u := sink.RunMeta().Usage
	if u == nil || u.Mode != "auto" || u.Requested || u.Verified || !strings.Contains(u.Reason, "no cumulative usage") {
		t.Errorf("usage probe %+v", u)
	}
	for _, q := range srv.seen() {
		if !q.probe && strings.Contains(q.body, "continuous_usage_stats") {
			t.Errorf("%s asked for continuous_usage_stats after the probe found none", q.id)
		}
	}
	for _, r := range sink.Records() {
		if r.TokensExact {
			t.Errorf("%s: tokens exact without usage in its events", r.RequestID)
		}
	}

	m := mocktest.Start(t, nil)
	sink, _ = run(t, Config{Trace: path, Targets: []string{m.URL()}, IgnoreEOS: true})
	if u := sink.RunMeta().Usage; u == nil || !u.Requested || !u.Verified {
		t.Errorf("against the mock: usage probe %+v", u)
	}
	for _, r := range sink.Records() {
		if !r.TokensExact {
			t.Errorf("%s: tokens not exact against the mock", r.RequestID)
		}
	}
}

// noUsageAnswer streams three events without usage, as Ollama does
// whatever continuous_usage_stats says.
func noUsageAnswer(w *bufio.Writer, _ *http.Request, _ []byte) {
	fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	chunk := func(s string) { fmt.Fprintf(w, "%x\r\n%s\r\n", len(s), s) }
	for i := range 3 {
		chunk(fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i))
	}
	chunk("data: [DONE]\n\n")
	fmt.Fprint(w, "0\r\n\r\n")
}

// Every request replay sends that is not traffic (ready checks, the
// /v1/models lookup, the prefix-cache reset, the probe) carries
// X-Tracekit-Probe: 1, and no traffic request does.
func TestNonTrafficCarriesProbeHeader(t *testing.T) {
	srv := startHostile(t, &hostileServer{})
	path := writeTrace(t, conv("a", 2, 0, 0, 3))
	_, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, ReadyTimeout: 5 * time.Second, ResetPrefixCache: true})
	if err != nil || res.Errors != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	kinds := map[string]bool{}
	for _, q := range srv.seen() {
		traffic := q.id != ""
		if traffic == q.probe {
			t.Errorf("%s %s (id %q): probe header %v", q.method, q.path, q.id, q.probe)
		}
		if !traffic {
			kinds[q.method+" "+q.path] = true
		}
	}
	for _, k := range []string{"GET /health", "GET /v1/models", "POST /reset_prefix_cache", "POST /v1/chat/completions"} {
		if !kinds[k] {
			t.Errorf("no non-traffic %s seen (%v): the test did not exercise it", k, kinds)
		}
	}
}
