package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// What replay makes of its transport's errors: the facts record.Outcome
// classifies (its precedence is tested there) and the kind that results.
func TestOutcomeFacts(t *testing.T) {
	reset := errors.New("connection reset by peer")
	gzipErr := errors.New("gzip: invalid header")
	idleConn := &conn{set: &connSet{idle: time.Second}} // an idle deadline armed, the request's own not passed
	for _, c := range []struct {
		name     string
		fail     func(o *outcome)
		failure  record.Failure
		canceled bool
		want     trace.ErrorKind
	}{
		{"a dial failure", func(o *outcome) { o.failed(record.StageSend, reset, false, nil, "") }, record.FailTransport, false, trace.ErrConnect},
		{"fasthttp's timeout without an idle deadline", func(o *outcome) { o.failed(record.StageSend, fasthttp.ErrTimeout, false, nil, "") }, record.FailRequestDeadline, false, trace.ErrTimeout},
		{"fasthttp's timeout with an idle deadline armed", func(o *outcome) { o.failed(record.StageSend, fasthttp.ErrTimeout, false, idleConn, "") }, record.FailIdleDeadline, false, trace.ErrHeadersTimeout},
		{"a read deadline mid-stream", func(o *outcome) { o.failed(record.StageBody, os.ErrDeadlineExceeded, false, idleConn, "") }, record.FailIdleDeadline, false, trace.ErrIdleTimeout},
		{"the run's own interruption", func(o *outcome) { o.failed(record.StageBody, errRunCanceled, false, nil, "") }, record.FailTransport, true, trace.ErrCanceled},
		{"a failure once the run was canceled", func(o *outcome) { o.failed(record.StageBody, os.ErrDeadlineExceeded, true, idleConn, "") }, record.FailIdleDeadline, true, trace.ErrCanceled},
		{"the decoder's own failure", func(o *outcome) {
			d := &decoders{net: stampReader{err: io.EOF}}
			o.bodyFailed(d, gzipErr, false, nil, "")
		}, record.FailDecode, false, trace.ErrMalformed},
		{"an encoding the decoder does not know", func(o *outcome) { o.bodyFailed(&decoders{}, gzipErr, false, nil, "") }, record.FailDecode, false, trace.ErrMalformed},
		{"the network's failure under a decoder", func(o *outcome) {
			d := &decoders{net: stampReader{err: reset}}
			o.bodyFailed(d, io.ErrUnexpectedEOF, false, nil, "")
		}, record.FailTransport, false, trace.ErrStreamTruncated},
		{"the run's interruption under a decoder", func(o *outcome) {
			d := &decoders{net: stampReader{err: errRunCanceled}}
			o.bodyFailed(d, gzipErr, false, nil, "")
		}, record.FailTransport, true, trace.ErrCanceled},
		{"a read failure without a decoder", func(o *outcome) { o.bodyFailed(nil, reset, false, nil, "") }, record.FailTransport, false, trace.ErrStreamTruncated},
	} {
		o := outcome{Outcome: record.Outcome{Parsed: trace.ErrStreamTruncated}}
		c.fail(&o)
		kind, _ := o.Kind()
		if o.Failure != c.failure || o.Canceled != c.canceled || kind != c.want {
			t.Errorf("%s: failure %d canceled %v kind %q, want %d %v %q", c.name, o.Failure, o.Canceled, kind, c.failure, c.canceled, c.want)
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
		{"[DONE], then the connection is cut before the body's end: complete", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			fmt.Fprint(w, head)
			chunk(w, good)
			chunk(w, "data: [DONE]\n\n")
		}, 0, trace.ErrNone, ""},
		{"a gzip body whose compressed data is broken, its framing whole: malformed", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
			chunk(w, "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffthis is no deflate data at all")
			fmt.Fprint(w, "0\r\n\r\n")
		}, 0, trace.ErrMalformed, "reading the stream after 0 events"},
		{"a gzip body cut mid-stream: the transport", func(w *bufio.Writer, _ *http.Request, _ []byte) {
			fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			fmt.Fprint(zw, good)
			zw.Flush()
			chunk(w, z.String())
		}, 0, trace.ErrStreamTruncated, "reading the stream after 1 events"},
	} {
		t.Run(c.name, func(t *testing.T) {
			silence = make(chan struct{}) // before the server's goroutines start
			srv := startHostile(t, &hostileServer{respond: c.respond, closeAfter: true})
			hold := silence
			t.Cleanup(func() { close(hold) }) // runs before the server's cleanup, which waits for its handlers
			sink, res, err := runBounded(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m", NoProbe: true, IdleTimeout: c.idle})
			if want := min(1, len(c.kind)); err != nil || res.Errors != int64(want) {
				t.Fatalf("run: %v %+v", err, res)
			}
			r := sink.Records()[0]
			if r.ErrorKind != c.kind || !strings.Contains(r.ErrorMessage, c.msg) {
				t.Errorf("recorded %q %q, want %q containing %q", r.ErrorKind, r.ErrorMessage, c.kind, c.msg)
			}
		})
	}
}
