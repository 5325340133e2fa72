package mock

import (
	"net"
	"net/http"
	"syscall"

	"github.com/klauspost/compress/gzip"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/clock"
)

// streamEnd says how a stream's event loop ended.
type streamEnd int

const (
	endDone        streamEnd = iota // every event sent; the tail follows
	endWriteFailed                  // a write failed: the client is gone
	endDisconnect                   // the injected disconnect fault
	endCanceled                     // the request's context ended
	endSlow                         // a scheduler write would block; raw.rest() is unwritten
	endError                        // the injected error fault: the error event is due at x.sched
)

// prepare plans event x.sent: its tokens and the time it is due, then
// applies the positional fault before it. It returns false with the end
// once the stream has no event left.
func (x *exchange) prepare() (streamEnd, bool) {
	if x.sent < x.ev {
		x.role = x.api == api.Chat && x.sent == 0
		x.take = 0
		if !x.role {
			x.take = x.takeAt(x.tok) // the first token alone, out of prefill
			if x.tok > 0 {
				steps := x.take
				if x.lat.SpecK > 0 {
					steps = 1 // a speculative step emits all its tokens at once
				}
				for range steps {
					x.sched += int64(x.lat.itl(x.rng, int(x.s.m.running.Load())))
				}
			}
		}
	}
	if end, ok := x.faultAt(); !ok {
		return end, false
	}
	if x.sent == x.ev {
		return endDone, false
	}
	return 0, true
}

// faultAt applies a positional fault before event number x.sent.
func (x *exchange) faultAt() (streamEnd, bool) {
	switch ef := &x.eff; x.sent {
	case ef.disconnectAt:
		return endDisconnect, false
	case ef.errorAt:
		return endError, false
	case ef.stallAt:
		x.sched += int64(ef.stallFor)
	case ef.malformedAt:
		x.pending = pendingMalformed
		return x.write(malformedEvent(x.api))
	}
	return 0, true
}

// fire writes the prepared event and logs it. It is the hot path: no
// allocation once the event lists have their capacity.
func (x *exchange) fire() (streamEnd, bool) {
	if !x.cached {
		x.s.cache.insert(x.p.segs) // the prompt's KV exists once prefill is done
		x.cached = true
	}
	x.buf = x.appendEvent(x.buf[:0])
	x.pending = pendingEvent
	x.countTokens()
	if end, ok := x.write(x.buf); !ok {
		return end, false
	}
	x.logEvent(clock.Mono())
	return 0, true
}

// write sends b as one chunk: on the scheduler with one non-blocking
// write, else through net/http, flushed.
func (x *exchange) write(b []byte) (streamEnd, bool) {
	if x.raw == nil {
		if !x.writeRaw(b) {
			return endWriteFailed, false
		}
		return 0, true
	}
	switch err := x.raw.writeChunk(b); {
	case err == errWouldBlock:
		return endSlow, false
	case err != nil:
		return endWriteFailed, false
	}
	return 0, true
}

// countTokens adds the prepared event's tokens to the server's counters
// (generation tokens, a speculative step's drafts and accepted tokens)
// before it is written, as a server counts a step's tokens when it makes
// them: a client that read the event and then scrapes finds them counted.
func (x *exchange) countTokens() {
	if x.take <= 0 {
		return
	}
	if x.tok > 0 && x.lat.SpecK > 0 {
		x.s.m.specStep(x.take - 1)
	}
	x.s.m.genTokens.Add(int64(x.take))
}

// logEvent records the prepared event as written at now and moves on. The
// first token's event gives the request's TTFT (now - arrival); each later
// token event an inter-token latency (now - the previous token event).
func (x *exchange) logEvent(now int64) {
	if x.take > 0 {
		if x.firstAnswer < 0 && x.tok >= x.reasoning {
			x.firstAnswer = len(x.e.EventMonoNs)
		}
		if x.tok == 0 {
			x.s.m.ttft.observe(now - x.e.ArrivalMonoNs)
		} else {
			x.s.m.itl.observe(now - x.lastTokNs)
		}
		x.lastTokNs = now
		x.holdKV(x.take)
	}
	late := max(now-x.sched, 0)
	x.e.EventMonoNs = append(x.e.EventMonoNs, now)
	x.e.EventTokens = append(x.e.EventTokens, int32(x.take))
	x.e.EventLatenessNs = append(x.e.EventLatenessNs, late)
	x.s.m.lateness.Record(late)
	x.s.m.events.Add(1)
	x.sent, x.tok = x.sent+1, x.tok+x.take
}

// writeRaw writes and flushes bytes through net/http, compressed when the
// stream is gzipped (one flush per write, so each event is decodable when
// it arrives).
func (x *exchange) writeRaw(b []byte) bool {
	if x.gz != nil {
		if _, err := x.gz.Write(b); err != nil || x.gz.Flush() != nil {
			return false
		}
	} else if _, err := x.w.Write(b); err != nil {
		return false
	}
	return x.rc.Flush() == nil
}

// loop runs the event loop on the handler goroutine, sleeping on its own
// timer; prepared says event x.sent is planned already.
func (x *exchange) loop(prepared bool) streamEnd {
	if prepared && x.sent == x.ev {
		return endDone
	}
	for {
		if !prepared {
			if end, ok := x.prepare(); !ok {
				return end
			}
		}
		prepared = false
		if !x.sleepUntil(x.sched) {
			return endCanceled
		}
		if end, ok := x.fire(); !ok {
			return end
		}
	}
}

// resumeAlone takes a stream back from a scheduler whose write would have
// blocked: it finishes that write blocking, then runs the rest of the
// stream on this goroutine.
func (x *exchange) resumeAlone() streamEnd {
	rest := x.raw.rest()
	x.raw = nil
	if _, err := x.conn.Write(rest); err != nil {
		return endWriteFailed
	}
	if x.pending == pendingMalformed {
		return x.loop(true) // the malformed event went out; the event it precedes is planned
	}
	x.logEvent(clock.Mono())
	return x.loop(false)
}

// attachRaw readies x for a scheduler: HTTP/1.1 (so net/http frames the
// body in chunks, as the scheduler does) on a socket it can write to.
func (x *exchange) attachRaw() bool {
	if !x.r.ProtoAtLeast(1, 1) {
		return false
	}
	c, ok := x.ctx.Value(connKey{}).(net.Conn)
	if !ok {
		return false
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	x.conn, x.raw = c, newRawWriter(rc)
	return true
}

// stream answers a streaming request event by event on the model's
// schedule: on a scheduler when the connection allows, else on this
// goroutine.
func (x *exchange) stream() {
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	if x.eff.gzip {
		h.Set("Content-Encoding", "gzip")
		x.gz = gzip.NewWriter(x.w)
	}
	x.w.WriteHeader(http.StatusOK)
	if err := x.rc.Flush(); err != nil {
		x.finish(OutcomeClientGone)
		return
	}
	x.e.Status, x.e.HeadersMonoNs = http.StatusOK, clock.Mono()
	if !x.admit() {
		x.interrupted()
		return
	}
	x.sched = x.prefill()
	x.buildHead()
	x.e.EventMonoNs, x.e.EventTokens, x.e.EventLatenessNs = make([]int64, 0, x.ev), make([]int32, 0, x.ev), make([]int64, 0, x.ev)

	var end streamEnd
	if x.s.sched != nil && x.gz == nil && x.attachRaw() {
		if end = x.s.sched.own(x); end == endSlow {
			x.s.m.slowStreams.Add(1)
			end = x.resumeAlone()
		}
		x.raw = nil
	} else {
		end = x.loop(false)
	}
	var tail []byte
	switch end {
	case endWriteFailed:
		x.finish(OutcomeClientGone)
		return
	case endDisconnect:
		x.finish(OutcomeFault)
		x.abort(false)
		return
	case endCanceled:
		x.interrupted()
		return
	case endError:
		// The error event comes when the event it replaces was due.
		if !x.sleepUntil(x.sched) {
			x.interrupted()
			return
		}
		x.finish(OutcomeFault)
		tail = x.appendError(x.buf[:0])
	default:
		x.cacheAnswer()
		x.finish(x.eff.logOutcome())
		tail = x.appendTail(x.buf[:0])
	}
	if len(tail) > 0 {
		x.writeRaw(tail)
	}
	if x.gz != nil {
		x.gz.Close() // the gzip trailer
		x.rc.Flush()
	}
}
