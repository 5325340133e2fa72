package replay

import (
	"errors"
	"fmt"
	"io"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// outcome is what one exchange saw: the facts record.Outcome classifies
// (the one classifier replay and capture share) and the messages the
// record's error message is chosen from. The exchange fills it; settle
// alone writes the record's ErrorKind.
type outcome struct {
	record.Outcome
	// parsedMsg is the parser's message (record.Stream.Verdict).
	parsedMsg string
	// msg says what failed (the error body, the content type, how far the
	// read got); the record's message unless the parser's verdict stands.
	msg string
}

// settle writes rec's error kind and message from o: the one place a
// replayed record's error kind is set.
func (r *Runner) settle(rec *trace.Record, o *outcome) {
	kind, parsed := o.Kind()
	msg := o.msg
	switch {
	case kind == trace.ErrHeadersTimeout:
		msg = fmt.Sprintf("no response headers within %v (--idle-timeout)", r.cfg.IdleTimeout)
	case parsed:
		msg = o.parsedMsg
	}
	rec.ErrorKind, rec.ErrorMessage = kind, msg
}

// failed notes err as the failure at stage s. Whether the run was
// canceled and whether an idle deadline was the one that expired are
// settled now, when they are true: an idle deadline was armed on the
// connection and the request's own deadline had not passed.
func (o *outcome) failed(s record.Stage, err error, canceled bool, c *conn, msg string) {
	idle := c != nil && c.set.idle > 0 && !c.pastRequestDeadline()
	o.Stage, o.Failure, o.msg = s, failure(err, idle), msg
	o.Canceled = canceled || errors.Is(err, errRunCanceled)
}

// bodyFailed notes err as the failure of reading the body. When d, the
// body's decoder over the network reads d.net, is in use, the network's
// own error is the failure when it had one (a reset, a deadline, the run's
// cancellation), else the decoder's: the encoding is unknown or the
// compressed data is broken.
func (o *outcome) bodyFailed(d *decoders, err error, canceled bool, c *conn, msg string) {
	if d != nil {
		nerr := d.net.err
		if nerr == nil || nerr == io.EOF {
			o.Stage, o.Failure, o.msg = record.StageBody, record.FailDecode, msg
			return
		}
		err = nerr
	}
	o.failed(record.StageBody, err, canceled, c, msg)
}

// failure names what err is: a deadline (the idle one when idle) or a
// transport failure.
func failure(err error, idle bool) record.Failure {
	switch {
	case !isTimeout(err) && !errors.Is(err, fasthttp.ErrTimeout):
		return record.FailTransport
	case idle:
		return record.FailIdleDeadline
	}
	return record.FailRequestDeadline
}

// verdict notes the parser's finding on the body read.
func (o *outcome) verdict(s *record.Stream) {
	o.Parsed, o.parsedMsg = s.Verdict()
	o.Done = s.Done()
}
