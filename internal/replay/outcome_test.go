package replay

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/trace"
)

// errorKind's precedence, case by case: a status the server sent outranks
// cancellation, cancellation outranks deadlines, deadlines outrank the
// stage's own kind, and any failure outranks the parser's verdict.
func TestErrorKindPrecedence(t *testing.T) {
	reset := errors.New("connection reset by peer")
	deadline := os.ErrDeadlineExceeded
	for _, c := range []struct {
		name string
		o    outcome
		want trace.ErrorKind
	}{
		{"a clean stream", outcome{stage: stageBody}, trace.ErrNone},
		{"the parser's verdict when the body ended", outcome{stage: stageBody, parsed: trace.ErrMalformed}, trace.ErrMalformed},
		{"no [DONE]", outcome{stage: stageBody, parsed: trace.ErrStreamTruncated}, trace.ErrStreamTruncated},
		{"a read failure outranks the parser", outcome{stage: stageBody, err: reset, parsed: trace.ErrMalformed}, trace.ErrStreamTruncated},
		{"the idle deadline mid-stream", outcome{stage: stageBody, err: deadline, idle: true, parsed: trace.ErrMalformed}, trace.ErrIdleTimeout},
		{"the request deadline mid-stream", outcome{stage: stageBody, err: deadline}, trace.ErrTimeout},
		{"cancellation outranks a deadline", outcome{stage: stageBody, err: deadline, idle: true, canceled: true}, trace.ErrCanceled},
		{"the run's own interruption", outcome{stage: stageBody, err: errRunCanceled}, trace.ErrCanceled},
		{"a dial failure", outcome{stage: stageSend, err: reset}, trace.ErrConnect},
		{"no headers within the idle timeout", outcome{stage: stageSend, err: fasthttp.ErrTimeout, idle: true}, trace.ErrHeadersTimeout},
		{"no headers within the request timeout", outcome{stage: stageSend, err: fasthttp.ErrTimeout}, trace.ErrTimeout},
		{"canceled before the headers", outcome{stage: stageSend, err: reset, canceled: true}, trace.ErrCanceled},
		{"an unreadable encoding", outcome{stage: stageDecode, err: errors.New("bad gzip header")}, trace.ErrMalformed},
		{"canceled while setting up the encoding", outcome{stage: stageDecode, err: errRunCanceled}, trace.ErrCanceled},
		{"a status outranks cancellation", outcome{stage: stageStatus, canceled: true, parsed: trace.ErrMalformed}, trace.ErrHTTPStatus},
		{"a JSON answer to a stream request", outcome{stage: stageNotStreaming, canceled: true}, trace.ErrNotStreaming},
	} {
		if got := errorKind(&c.o); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The same precedence on the wire: each server misbehaves in two ways at
// once and the record names the one that wins, with its message.
func TestErrorKindPrecedenceOnTheWire(t *testing.T) {
	path := writeTrace(t, conv("a", 1, 0, 0, 3))
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := func(w *bufio.Writer, s string) { fmt.Fprintf(w, "%x\r\n%s\r\n", len(s), s) }
	bad := "data: {not json\n\n"
	var silence chan struct{} // this subtest's: closed when it ends
	good := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w \"}}]}\n\n"
	for _, c := range []struct {
		name    string
		respond func(w *bufio.Writer, req *http.Request, body []byte)
		idle    time.Duration
		kind    trace.ErrorKind
		msg     string
	}{
		{"a bad event, then the body ends without [DONE]: the parser's first finding", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			fmt.Fprint(w, head)
			chunk(w, good)
			chunk(w, bad)
			fmt.Fprint(w, "0\r\n\r\n")
		}, 0, trace.ErrMalformed, "event 2: not a valid JSON object"},
		{"a bad event, then the connection is cut: the transport", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			fmt.Fprint(w, head)
			chunk(w, good)
			chunk(w, bad)
		}, 0, trace.ErrStreamTruncated, "reading the stream after 1 events"},
		{"a bad event, then silence: the idle timeout", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			fmt.Fprint(w, head)
			chunk(w, bad)
			w.Flush()
			<-silence // until the test ends: the client's idle deadline ends the request
		}, 300 * time.Millisecond, trace.ErrIdleTimeout, "reading the stream after 0 events"},
		{"an error status with an SSE error body: the status", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			b := "data: {\"error\":{\"message\":\"overloaded\"}}\n\n"
			fmt.Fprintf(w, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}, 0, trace.ErrHTTPStatus, "HTTP 503: data:"},
		{"a JSON error object where a stream was asked: not streaming", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			b := `{"error":{"message":"bad"}}`
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}, 0, trace.ErrNotStreaming, "server answered without streaming"},
	} {
		t.Run(c.name, func(t *testing.T) {
			silence = make(chan struct{}) // before the server's goroutines start
			srv := startHostile(t, &hostileServer{respond: c.respond, closeAfter: true})
			hold := silence
			t.Cleanup(func() { close(hold) }) // runs before the server's cleanup, which waits for its handlers
			sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m", NoProbe: true, IdleTimeout: c.idle})
			if err != nil || res.Errors != 1 {
				t.Fatalf("run: %v %+v", err, res)
			}
			r := sink.Records()[0]
			if r.ErrorKind != c.kind || !strings.Contains(r.ErrorMessage, c.msg) {
				t.Errorf("recorded %q %q, want %q containing %q", r.ErrorKind, r.ErrorMessage, c.kind, c.msg)
			}
		})
	}
}
