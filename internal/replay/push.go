package replay

import (
	"io"
	"net"
	"os"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/record"
)

// A streamed body on a kernel-stamped connection without TLS is read by
// the stamp package's poller (stamp.Conn.Push): the poller's goroutine
// reads each arrival, this file's pushBody undoes the HTTP framing and
// feeds the stream's parser, and the request's goroutine sleeps until
// the body ends, the request's deadline or idle timeout passes, or the
// run is canceled. No goroutine wakes per event. The stamps are the
// ones Read would give: the kernel's (and the observer's in kernel-offset
// mode), never before the request's send.

// pushBody is one exchange's body being read by the poller.
type pushBody struct {
	c      *conn
	body   *h1Body
	stream *record.Stream
	floor  int64 // the request's send (Mono): no event is stamped before it
	start  int64 // the run's start (Mono): stamps are run-relative
	err    error // the read's failure
	done   chan struct{}
	fn     func(p []byte, stampNs int64, err error) bool // feed, made once
	timer  *time.Timer
}

func newPushBody() *pushBody {
	pb := &pushBody{done: make(chan struct{}, 1)}
	pb.fn = pb.feed
	return pb
}

// feed is the poller's PushFunc.
func (pb *pushBody) feed(p []byte, stampNs int64, err error) bool {
	if err != nil {
		if err == io.EOF && pb.body.frame == bodyToClose {
			pb.body.eof = true
		} else {
			pb.err = pb.body.fail(err)
		}
		pb.done <- struct{}{}
		return false
	}
	pb.c.readNs.Store(stampNs)
	n, ferr := pb.body.take(p)
	if n > 0 {
		pb.stream.Feed(p[:n], max(stampNs, pb.floor)-pb.start)
	}
	if ferr != nil {
		pb.err = pb.body.fail(ferr)
	}
	if ferr != nil || pb.body.ended() {
		pb.done <- struct{}{}
		return false
	}
	return true
}

// pushable reports whether c's body can be read by the poller: a kernel
// stamp mode, and no TLS between the stamps and the HTTP bytes.
func pushable(c *conn) bool {
	return c != nil && c.rx != nil && c.Conn == net.Conn(c.rx)
}

// readPushed reads resp's streamed body on c into ex.stream with the
// poller, as ReadBody would: it returns the read's error, nil when the
// body ended. pushed is false when the connection could not be pushed;
// the caller reads the rest with Read.
func (r *runState) readPushed(c *conn, resp *h1Resp, ex *exchange) (pushed bool, err error) {
	b := &resp.body
	s := ex.stream
	if ex.push == nil {
		ex.push = newPushBody()
	}
	pb := ex.push
	*pb = pushBody{c: c, body: b, stream: s, floor: c.wroteNs.Load(), start: r.start,
		done: pb.done, fn: pb.fn, timer: pb.timer}
	// The bytes the headers' read brought along come first.
	if n := c.br.Buffered(); n > 0 {
		raw, _ := c.br.Peek(n)
		k, ferr := b.take(raw)
		s.Feed(raw[:k], c.stampFn())
		c.br.Discard(n)
		if ferr != nil {
			return true, b.fail(ferr)
		}
	}
	if !b.ended() {
		if !c.rx.Push(ex.buf, pb.fn) {
			return false, nil
		}
		err = pb.wait(c)
		c.rx.Unpush()
		if err != nil {
			select {
			case <-pb.done: // it ended meanwhile: that is the outcome
				err = nil
			default:
			}
		}
	}
	if c.rx.Pending() > 0 {
		b.keep = false // bytes after the body
	}
	if err == nil && b.err == nil {
		s.End()
	}
	if err == nil {
		err = b.err
	}
	return true, err
}

// wait waits for the push to end (nil), the request's deadline, the idle
// timeout after the last read, or the run's cancellation.
func (pb *pushBody) wait(c *conn) error {
	idle := int64(c.set.idle)
	for {
		wait := time.Duration(1<<63 - 1)
		if rd := c.reqDeadline.Load(); rd != 0 {
			wait = time.Duration(rd - time.Now().UnixNano())
		}
		if idle > 0 {
			wait = min(wait, time.Duration(c.readNs.Load()+idle-clock.Mono()))
		}
		if wait <= 0 {
			return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.ErrDeadlineExceeded}
		}
		if pb.timer == nil {
			pb.timer = time.NewTimer(wait)
		} else {
			pb.timer.Reset(wait)
		}
		select {
		case <-pb.done:
			pb.timer.Stop()
			return nil
		case <-pb.timer.C:
		case <-c.set.canceledCh:
			pb.timer.Stop()
			return errRunCanceled
		}
	}
}
