package replay

import (
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/trace"
)

// stage is how far an exchange got before it ended.
type stage uint8

const (
	stageSend         stage = iota // no response headers
	stageStatus                    // a non-2xx status
	stageDecode                    // the Content-Encoding could not be set up
	stageNotStreaming              // a stream was asked for and a JSON body came
	stageBody                      // reading the body (to its end, or until err)
)

// outcome is what one exchange saw: everything its record's error kind is
// decided from. The exchange fills it; errorKind alone classifies it and
// settle alone writes the record's ErrorKind.
type outcome struct {
	stage stage
	// err is the stage's failure (nil: the body was read to its end).
	err error
	// canceled: the run was canceled (signal, --benchmark-timeout) when
	// err happened.
	canceled bool
	// idle: an idle deadline was armed on the connection and the
	// request's own deadline had not passed when err happened, so a
	// timeout was the idle one.
	idle bool
	// parsed is the parser's verdict on what arrived (record.Stream.Verdict),
	// parsedMsg its message.
	parsed    trace.ErrorKind
	parsedMsg string
	// msg says what failed at the stage (the error body, the content type,
	// how far the read got); the record's message unless the parser's
	// verdict stands.
	msg string
}

// errorKind classifies an exchange, in this precedence:
//
//  1. the server answered: a non-2xx status is http_status, a JSON body
//     to a stream request not_streaming, whatever else happened;
//  2. a failure while the run was canceled is canceled;
//  3. a deadline: an armed idle deadline before the request's own is
//     headers_timeout before the headers and idle_timeout after them, else
//     timeout (--request-timeout);
//  4. any other failure is the stage's own: connect before the headers,
//     malformed when the body's encoding cannot be read, stream_truncated
//     while reading the body;
//  5. a body read to its end carries the parser's verdict (malformed,
//     stream_truncated without [DONE], or none).
func errorKind(o *outcome) trace.ErrorKind {
	switch o.stage {
	case stageStatus:
		return trace.ErrHTTPStatus
	case stageNotStreaming:
		return trace.ErrNotStreaming
	}
	if o.err == nil {
		return o.parsed
	}
	switch {
	case o.canceled || errors.Is(o.err, errRunCanceled):
		return trace.ErrCanceled
	case isTimeout(o.err) || errors.Is(o.err, fasthttp.ErrTimeout):
		switch {
		case !o.idle:
			return trace.ErrTimeout
		case o.stage == stageSend:
			return trace.ErrHeadersTimeout
		default:
			return trace.ErrIdleTimeout
		}
	}
	switch o.stage {
	case stageSend:
		return trace.ErrConnect
	case stageDecode:
		return trace.ErrMalformed
	default:
		return trace.ErrStreamTruncated
	}
}

// settle writes rec's error kind and message from o: the one place a
// replayed record's error kind is set.
func (r *Runner) settle(rec *trace.Record, o *outcome) {
	kind := errorKind(o)
	msg := o.msg
	switch {
	case kind == trace.ErrHeadersTimeout:
		msg = fmt.Sprintf("no response headers within %v (--idle-timeout)", r.cfg.IdleTimeout)
	case o.stage == stageBody && o.err == nil:
		msg = o.parsedMsg
	}
	rec.ErrorKind, rec.ErrorMessage = kind, msg
}

// failed notes err as the failure of stage: whether the run was canceled
// and whether an idle deadline was the one that expired are settled now,
// when they are true.
func (o *outcome) failed(s stage, err error, canceled bool, c *conn, msg string) {
	o.stage, o.err, o.canceled, o.msg = s, err, canceled, msg
	o.idle = c != nil && c.set.idle > 0 && !c.pastRequestDeadline()
}
