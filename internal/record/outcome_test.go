package record

import (
	"fmt"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// Kind's precedence, case by case: each row sets the facts that compete
// and names the one that wins.
func TestOutcomeKind(t *testing.T) {
	const (
		none  = trace.ErrNone
		bad   = trace.ErrMalformed
		trunc = trace.ErrStreamTruncated
	)
	for _, c := range []struct {
		name   string
		o      Outcome
		want   trace.ErrorKind
		parsed bool
	}{
		// a body read to its end: the parser's verdict
		{"a clean stream", Outcome{Stage: StageBody, Done: true}, none, true},
		{"a bad event, then [DONE]", Outcome{Stage: StageBody, Parsed: bad, Done: true}, bad, true},
		{"the body ended without [DONE]", Outcome{Stage: StageBody, Parsed: trunc}, trunc, true},
		{"the requester gone after the whole body: the body's verdict", Outcome{Stage: StageBody, Canceled: true, Parsed: trunc}, trunc, true},

		// the server's answer outranks everything after it
		{"a status outranks the parser", Outcome{Stage: StageStatus, Parsed: bad}, trace.ErrHTTPStatus, false},
		{"a status outranks cancellation", Outcome{Stage: StageStatus, Failure: FailTransport, Canceled: true}, trace.ErrHTTPStatus, false},
		{"a status outranks a deadline", Outcome{Stage: StageStatus, Failure: FailIdleDeadline}, trace.ErrHTTPStatus, false},
		{"a JSON answer to a stream request", Outcome{Stage: StageNotStreaming, Canceled: true, Failure: FailTransport}, trace.ErrNotStreaming, false},

		// a body that cannot be decoded
		{"an encoding that cannot be decoded", Outcome{Stage: StageBody, Failure: FailDecode, Parsed: trunc}, bad, false},
		{"a broken compressed body outranks [DONE]", Outcome{Stage: StageBody, Failure: FailDecode, Done: true}, bad, false},
		{"a broken compressed body outranks cancellation", Outcome{Stage: StageBody, Failure: FailDecode, Canceled: true, Parsed: trunc}, bad, false},

		// [DONE] came: what failed after it cut only the body's last bytes
		{"a reset after [DONE]", Outcome{Stage: StageBody, Failure: FailTransport, Done: true}, none, true},
		{"the requester gone after [DONE]", Outcome{Stage: StageBody, Failure: FailTransport, Canceled: true, Done: true}, none, true},
		{"the idle deadline after [DONE]", Outcome{Stage: StageBody, Failure: FailIdleDeadline, Done: true}, none, true},
		{"the request deadline after a bad event and [DONE]", Outcome{Stage: StageBody, Failure: FailRequestDeadline, Parsed: bad, Done: true}, bad, true},

		// cancellation outranks deadlines and the transport
		{"canceled mid-stream", Outcome{Stage: StageBody, Failure: FailTransport, Canceled: true, Parsed: bad}, trace.ErrCanceled, false},
		{"canceled outranks the idle deadline", Outcome{Stage: StageBody, Failure: FailIdleDeadline, Canceled: true, Parsed: trunc}, trace.ErrCanceled, false},
		{"canceled outranks the request deadline", Outcome{Stage: StageBody, Failure: FailRequestDeadline, Canceled: true}, trace.ErrCanceled, false},
		{"canceled before the headers", Outcome{Stage: StageSend, Failure: FailTransport, Canceled: true}, trace.ErrCanceled, false},
		{"canceled outranks a headers deadline", Outcome{Stage: StageSend, Failure: FailIdleDeadline, Canceled: true}, trace.ErrCanceled, false},

		// deadlines outrank the transport and the parser
		{"no headers within the idle deadline", Outcome{Stage: StageSend, Failure: FailIdleDeadline}, trace.ErrHeadersTimeout, false},
		{"no headers within the request deadline", Outcome{Stage: StageSend, Failure: FailRequestDeadline}, trace.ErrTimeout, false},
		{"the idle deadline mid-stream", Outcome{Stage: StageBody, Failure: FailIdleDeadline, Parsed: bad}, trace.ErrIdleTimeout, false},
		{"the request deadline mid-stream", Outcome{Stage: StageBody, Failure: FailRequestDeadline, Parsed: trunc}, trace.ErrTimeout, false},

		// the transport: by stage, over the parser
		{"a dial failure", Outcome{Stage: StageSend, Failure: FailTransport}, trace.ErrConnect, false},
		{"a reset mid-stream", Outcome{Stage: StageBody, Failure: FailTransport, Parsed: trunc}, trunc, false},
		{"a reset outranks a bad event before it", Outcome{Stage: StageBody, Failure: FailTransport, Parsed: bad}, trunc, false},
	} {
		got, parsed := c.o.Kind()
		if got != c.want || parsed != c.parsed {
			t.Errorf("%s: %+v is %q (parsed %v), want %q (parsed %v)", c.name, c.o, got, parsed, c.want, c.parsed)
		}
	}
}

// Over every combination of facts: the server's answer always wins, a
// clean end always gives the parser's verdict, and every outcome is a
// kind a record may carry.
func TestOutcomeKindEveryCombination(t *testing.T) {
	known := map[trace.ErrorKind]bool{}
	for _, k := range []trace.ErrorKind{trace.ErrNone, trace.ErrTimeout, trace.ErrIdleTimeout, trace.ErrConnect,
		trace.ErrHTTPStatus, trace.ErrStreamTruncated, trace.ErrMalformed, trace.ErrCanceled,
		trace.ErrHeadersTimeout, trace.ErrNotStreaming} {
		known[k] = true
	}
	// the parser's verdicts, as a Stream gives them: without [DONE] the
	// verdict is never none
	verdicts := []struct {
		parsed trace.ErrorKind
		done   bool
	}{{trace.ErrNone, true}, {trace.ErrMalformed, true}, {trace.ErrMalformed, false}, {trace.ErrStreamTruncated, false}}
	seen := map[trace.ErrorKind]bool{}
	for s := StageSend; s <= StageBody; s++ {
		for f := FailNone; f <= FailDecode; f++ {
			for _, canceled := range []bool{false, true} {
				for _, v := range verdicts {
					o := Outcome{Stage: s, Failure: f, Canceled: canceled, Parsed: v.parsed, Done: v.done}
					name := fmt.Sprintf("%+v", o)
					got, parsed := o.Kind()
					seen[got] = true
					switch {
					case !known[got]:
						t.Errorf("%s: %q is no error kind", name, got)
					case s == StageStatus && got != trace.ErrHTTPStatus, s == StageNotStreaming && got != trace.ErrNotStreaming:
						t.Errorf("%s: %q, want the server's answer", name, got)
					case s == StageBody && f == FailNone && (got != v.parsed || !parsed):
						t.Errorf("%s: %q, want the parser's %q", name, got, v.parsed)
					case parsed && got != v.parsed:
						t.Errorf("%s: %q said to be the parser's %q", name, got, v.parsed)
					case s == StageBody && f == FailDecode && got != trace.ErrMalformed:
						t.Errorf("%s: %q, want malformed", name, got)
					case got == trace.ErrNone && !v.done:
						t.Errorf("%s: a success without [DONE]", name)
					}
				}
			}
		}
	}
	for k := range known {
		if !seen[k] {
			t.Errorf("no combination gives %q", k)
		}
	}
}
