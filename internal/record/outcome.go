package record

import "github.com/tracekit/tracekit/trace"

// Stage is how far an exchange got before it ended.
type Stage uint8

const (
	StageSend         Stage = iota // no response headers: not sent, or no answer
	StageStatus                    // the server answered a non-2xx status
	StageNotStreaming              // a stream was asked for and one JSON body came
	StageBody                      // the body was read, to its end or until a Failure
)

// Failure is what cut an exchange short, in the terms the error kinds need.
type Failure uint8

const (
	// FailNone: nothing failed; the body was read to its end.
	FailNone Failure = iota
	// FailTransport: the connection failed (dial, write, reset, an early
	// end of the framing).
	FailTransport
	// FailRequestDeadline: the request's own deadline (--request-timeout)
	// expired.
	FailRequestDeadline
	// FailIdleDeadline: an idle deadline (--idle-timeout) expired before
	// the request's own.
	FailIdleDeadline
	// FailDecode: the body's Content-Encoding is one that cannot be decoded,
	// or its compressed data is broken, while the connection itself was
	// fine.
	FailDecode
)

// Outcome is what one exchange saw: every fact its record's error kind is
// decided from. Replay (a client) and capture (a proxy) fill it from their
// own transports; Kind is the one classifier, so both write the same kind
// for the same event on the wire.
type Outcome struct {
	Stage   Stage
	Failure Failure
	// Canceled: the exchange's requester had gone when Failure happened
	// (replay's run was canceled; capture's client went away).
	Canceled bool
	// Parsed is the parser's verdict on the body (Stream.Verdict); Done
	// says data: [DONE] or a whole JSON body arrived (Stream.Done).
	Parsed trace.ErrorKind
	Done   bool
}

// Kind classifies an exchange. parsed reports that the kind is the
// parser's verdict, whose message is then the record's. The precedence:
//
//  1. what the server answered: a non-2xx status is http_status, a JSON
//     body to a stream request not_streaming, whatever happened after;
//  2. a body read to its end carries the parser's verdict (none,
//     malformed, stream_truncated without [DONE]);
//  3. a body that cannot be decoded is malformed: the server sent it so;
//  4. a body that had its [DONE] carries the parser's verdict: a failure
//     after it cut only the body's last bytes, not the answer;
//  5. a failure once the requester had gone is canceled;
//  6. a deadline: the idle one is headers_timeout before the headers and
//     idle_timeout after them, the request's own timeout;
//  7. a transport failure is connect before the headers and
//     stream_truncated in the body.
func (o *Outcome) Kind() (kind trace.ErrorKind, parsed bool) {
	switch o.Stage {
	case StageStatus:
		return trace.ErrHTTPStatus, false
	case StageNotStreaming:
		return trace.ErrNotStreaming, false
	}
	switch {
	case o.Failure == FailNone:
		return o.Parsed, true
	case o.Failure == FailDecode:
		return trace.ErrMalformed, false
	case o.Done && o.Stage == StageBody:
		return o.Parsed, true
	case o.Canceled:
		return trace.ErrCanceled, false
	case o.Failure == FailIdleDeadline && o.Stage == StageSend:
		return trace.ErrHeadersTimeout, false
	case o.Failure == FailIdleDeadline:
		return trace.ErrIdleTimeout, false
	case o.Failure == FailRequestDeadline:
		return trace.ErrTimeout, false
	case o.Stage == StageSend:
		return trace.ErrConnect, false
	}
	return trace.ErrStreamTruncated, false
}
