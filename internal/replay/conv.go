package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// closedLoop runs one conversation as a user would: turn k+1 is sent its
// think time (scaled by --speed) after the response to turn k ended, with
// the history so far (the server's answers, or the reference answers).
func (r *runState) closedLoop(runCtx, stopCtx context.Context, conv []trace.Turn, at int64, onTime bool) {
	if isGraph(conv) {
		r.graphClosed(runCtx, stopCtx, conv, at, onTime)
		return
	}
	if !r.allEncodedHere(conv) {
		r.closedLoopAPI(runCtx, stopCtx, conv, at, onTime)
		return
	}
	ex := r.exPool.Get().(*exchange)
	defer r.exPool.Put(ex)
	// The body lives in ex.body from turn to turn: each message and answer
	// is encoded once, when it is known (an answer right after its stream
	// ended), and a turn's body is prepared before its think time passes,
	// so the send instant only writes.
	cb := convBody{buf: ex.body[:0]}
	defer func() { ex.body = cb.buf[:0] }()
	var histTokens int32
	var histMedia tally // answers carry none: the media of the messages so far
	for k := range conv {
		turn := &conv[k]
		if k > 0 {
			at = r.start + ex.rec.DoneNs + r.scale(turn.ThinkTimeNs)
		}
		model := r.model(turn)
		msgs, tokens := r.messages(turn)
		histMedia = histMedia.plus(mediaOf(msgs))
		ex.media = histMedia
		for i := range msgs {
			cb.add(&r.bo, model, &msgs[i])
		}
		body := cb.build(&r.bo, model, turn)
		if !r.waitUntil(stopCtx, at, k == 0 && onTime) {
			return
		}
		ex.agent = 0
		if !r.do(runCtx, stopCtx, ex, turn, body, histTokens+tokens, at) {
			return
		}
		if k+1 < len(conv) {
			answer := r.chatAnswer(ex, turn)
			cb.add(&r.bo, model, &answer)
			histTokens += tokens + answer.Tokens
		}
		if runCtx.Err() != nil {
			return
		}
	}
}

// model is the model turn asks for: its own, or the run's.
func (r *runState) model(turn *trace.Turn) string {
	if turn.Model != "" {
		return turn.Model
	}
	return r.cfg.Model
}

// chatAnswer is the assistant message of a chat's next turn: the text of
// answer, and tool calls when the answer or the trace has any
// (answerMessage; a chat without tool calls never gets there).
func (r *runState) chatAnswer(ex *exchange, turn *trace.Turn) trace.Message {
	if ex.stream.ToolCalls() > 0 || len(turn.ReferenceToolCalls) > 0 {
		return r.answerMessage(ex, turn)
	}
	answer, answerTokens := r.answer(ex, turn)
	return trace.Message{Role: "assistant", Content: answer, Tokens: answerTokens}
}

// answer is what the next turn's history holds as the assistant's reply to
// turn: the server's answer, or the trace's with --history reference (and
// as a fallback when the server's answer failed empty).
func (r *runState) answer(ex *exchange, turn *trace.Turn) (string, int32) {
	text := ex.stream.Text()
	useRef := turn.ReferenceAnswer != "" &&
		(r.cfg.History == HistoryReference || (text == "" && ex.rec.ErrorKind != ""))
	if useRef {
		return turn.ReferenceAnswer, int32(r.tok.Count(turn.ReferenceAnswer))
	}
	if ex.rec.ErrorKind == "" && ex.rec.CompletionTokens >= 0 {
		return text, ex.rec.CompletionTokens
	}
	return text, int32(r.tok.Count(text))
}

// openLoop sends every turn of conv at its own arrival offset, whether or
// not the previous turn has finished, with the reference history
// (referenceAnswer).
func (r *runState) openLoop(runCtx, stopCtx context.Context, conv []trace.Turn) {
	if isGraph(conv) {
		r.graphOpen(runCtx, stopCtx, conv)
		return
	}
	if !r.allEncodedHere(conv) {
		r.openLoopAPI(runCtx, stopCtx, conv)
		return
	}
	done := make(chan struct{}, len(conv))
	launched := 0
	// hist is the history encoded once, message by message; each turn's
	// body (head, hist, tail) is copied out of it into a buffer of its own
	// before the turn's arrival time, as requests of one conversation
	// overlap. One prepared body per conversation at a time.
	var hist encMsgs
	var histTokens int32
	var histMedia tally
	for k := range conv {
		turn := &conv[k]
		at := r.start + r.scale(turn.ArrivalOffsetNs)
		msgs, tokens := r.messages(turn)
		histMedia = histMedia.plus(mediaOf(msgs))
		media := histMedia
		for i := range msgs {
			hist.add(&r.bo, &msgs[i])
		}
		bp := r.bodies.Get().(*[]byte)
		*bp = r.bo.appendBodyEnc((*bp)[:0], r.model(turn), hist.b, turn)
		if !r.waitUntil(stopCtx, at, true) {
			r.bodies.Put(bp)
			break
		}
		input := histTokens + tokens
		launched++
		go func() {
			defer func() { done <- struct{}{} }()
			defer r.bodies.Put(bp)
			ex := r.exPool.Get().(*exchange)
			defer r.exPool.Put(ex)
			ex.agent = 0
			ex.media = media
			r.do(runCtx, stopCtx, ex, turn, *bp, input, at)
		}()
		if k+1 == len(conv) {
			break // no later turn needs this one's answer in its history
		}
		// Building the answer (and counting its tokens) costs milliseconds
		// of CPU for long outputs: done after the send, and only when a
		// later turn will carry it.
		answer := r.referenceAnswer(turn)
		hist.add(&r.bo, &answer)
		histTokens += tokens + answer.Tokens
	}
	for range launched {
		<-done
	}
}

// referenceAnswer is the assistant message open loop carries for turn's
// answer, in a chat as in a graph: the trace's text and tool calls, and a
// synthesized text of OutputTokens tokens only where the trace has
// neither (a tool call without text stays that).
func (r *runState) referenceAnswer(turn *trace.Turn) trace.Message {
	answer := turn.ReferenceAnswer
	if answer == "" && len(turn.ReferenceToolCalls) == 0 {
		answer = fillerText(turn.OutputTokens, r.cfg.Seed, fmt.Sprintf("%s/%d/answer", turn.ConversationID, turn.Turn))
	}
	return trace.Message{Role: "assistant", Content: answer, ToolCalls: turn.ReferenceToolCalls,
		Tokens: int32(r.tok.Count(answer)) + r.callTokens(turn.ReferenceToolCalls)}
}

// do sends one request with the prepared body and records it. It returns
// false when the request was not sent because the run is stopping (limits,
// duration, canceled).
// The outcome is left in ex.rec and ex.stream.
func (r *runState) do(runCtx, stopCtx context.Context, ex *exchange, turn *trace.Turn,
	body []byte, inputTokens int32, intended int64) bool {
	if r.slots != nil {
		select {
		case r.slots <- struct{}{}:
			defer func() { <-r.slots }()
		case <-stopCtx.Done():
			return false
		}
	}
	slot := clock.Mono()
	if stopCtx.Err() != nil {
		return false
	}
	seq := r.seq.Add(1)
	if r.cfg.MaxRequests > 0 && seq > int64(r.cfg.Warmup+r.cfg.MaxRequests) {
		r.stop()
		return false
	}
	if r.cfg.MaxRequests > 0 && seq == int64(r.cfg.Warmup+r.cfg.MaxRequests) {
		defer r.stop() // the last one: nothing new after it
	}

	t := r.pick(turn.ConversationID)
	ep := r.endpointOf(turn)
	if err := ex.stream.SetAPI(api.Name(ep)); err != nil { // resets the stream
		panic(err) // the table has every Endpoint
	}
	ex.stream.Expect(int(turn.OutputTokens) + 2) // a role chunk and a closing event beside one per token
	rec := &ex.rec
	*rec = trace.Record{
		RequestID:      requestID(turn, 0),
		ConversationID: turn.ConversationID,
		Turn:           turn.Turn,
		Shard:          int32(r.cfg.Shard),
		Warmup:         seq <= int64(r.cfg.Warmup),
		Target:         t.shown,
		IntendedNs:     intended - r.start,
		SlotNs:         slot - r.start,
		InputTokens:    inputTokens,
		MaxTokens:      turn.OutputTokens,
		EventNs:        rec.EventNs[:0],
		EventTokens:    rec.EventTokens[:0],
		PromptTokens:   -1, CompletionTokens: -1, CachedTokens: -1,
		Parents: turn.Parents, // the trace's, never written: sinks may keep it
		After:   turn.After,
		Model:   turn.Model, // the turn's own; "" for the run's
	}
	rec.NonStreaming = turn.NonStreaming || !trace.Generates(string(ep)) // those answer one body
	if ex.media.items > 0 {                                              // what a request with media sent; 0 for others (trace.Record)
		ex.media.fill(rec)
		rec.RequestBytes = int64(len(body))
	}
	ex.media = tally{}

	req, resp := fasthttp.AcquireRequest(), &ex.hresp
	defer fasthttp.ReleaseRequest(req)
	t.prepare(req, "POST", t.urls[ep], rec.RequestID)
	t.setAPIHeaders(req, ep)
	req.Header.SetContentType(contentType(ep))
	if rec.NonStreaming {
		req.Header.Set("Accept", "application/json")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	req.Header.Set("Accept-Encoding", "identity")
	if r.cfg.MockHints {
		setMockHints(req, turn)
	}
	if r.cfg.SessionHeader != "" || r.cfg.SessionField != "" {
		body = r.setSession(req, ex, turn, body, ep)
	}
	req.SetBodyRaw(body)

	r.sent.Add(1)
	r.inflight.Add(1)
	r.exchange(runCtx, t, req, resp, ex, slot)
	rec.DoneNs = r.now()
	fillAPI(rec, ex, ep)
	r.inflight.Add(-1)
	r.done.Add(1)
	if rec.ErrorKind == trace.ErrCanceledByClient {
		r.canceledByClient.Add(1)
	} else if rec.ErrorKind != "" {
		r.errs.Add(1)
	} else if rec.ToolCalls > 0 || len(turn.ReferenceToolCalls) > 0 {
		if rec.ToolCallMismatch = toolCallMismatch(ex, turn); rec.ToolCallMismatch {
			r.mismatches.Add(1)
		}
	}
	r.sink.Submit(rec)
	return true
}

// exchange performs the HTTP exchange of ex.rec, reads its stream and
// settles the record's error kind from what it saw.
func (r *runState) exchange(runCtx context.Context, t *target, req *fasthttp.Request, resp *h1Resp, ex *exchange, slot int64) {
	o := &ex.out
	*o = outcome{}
	cancel, canceling := r.cancelDelay(ex.rec.RequestID)
	if r.cfg.RequestTimeout > 0 && r.cfg.RequestTimeout <= cancel {
		canceling = false // its timeout comes first
	}
	r.exchangeOnce(runCtx, t, req, resp, ex, slot, cancel, canceling)
	r.settle(&ex.rec, o)
	if canceling {
		settleCancel(&ex.rec, cancel)
	}
}

// exchangeOnce does the work of exchange, leaving what it saw in ex.out.
// A request replay cancels (cancel, canceling) gets the earlier of its
// deadline and the cancellation's: the read that passes it fails, and the
// connection is closed as a client that gives up closes it.
func (r *runState) exchangeOnce(runCtx context.Context, t *target, req *fasthttp.Request, resp *h1Resp, ex *exchange, slot int64,
	cancel time.Duration, canceling bool) {
	rec, o := &ex.rec, &ex.out
	var deadline time.Time
	if r.cfg.RequestTimeout > 0 {
		deadline = time.Now().Add(r.cfg.RequestTimeout)
	}
	if canceling {
		deadline = time.Now().Add(cancel)
	}
	retryID := rec.ConversationID + "-" + strconv.Itoa(int(rec.Turn)) + "-1" // requestID(turn, 1)
	retried, err := t.do(req, resp, deadline, retryID)
	if retried {
		rec.Attempt, rec.RequestID = 1, retryID
	}
	headers := r.now()
	c := resp.c
	headers = r.headerStamp(c, headers) // stamp.go: the kernel's receive stamp in kernel modes
	if c != nil {
		if w := c.wroteNs.Load(); w >= slot {
			rec.SentNs = w - r.start
			if ws := c.writeStartNs.Load(); rec.MediaItems > 0 && ws >= slot {
				rec.WriteStartNs = ws - r.start
			}
		}
	}
	if err != nil {
		o.failed(record.StageSend, err, runCtx.Err() != nil, c, "sending: "+err.Error())
		return
	}
	rec.HeadersNs = headers
	rec.Status = int32(resp.StatusCode())
	body := resp.Body()
	if rec.Status/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(body, 4<<10))
		o.Stage, o.msg = record.StageStatus, fmt.Sprintf("HTTP %d: %s", rec.Status, bytes.TrimSpace(b))
		resp.close(errors.New("discarding an error body"))
		return
	}
	now := r.bodyClock(c)  // stamp.go: the run clock, or c's kernel receive stamps
	var decoding *decoders // the body's decoder, nil for identity
	if enc := resp.Header.ContentEncoding(); len(enc) > 0 && !bytes.EqualFold(enc, []byte("identity")) {
		decoding = &ex.dec
		dec, err := decoding.decode(enc, body, now)
		if err != nil {
			o.bodyFailed(decoding, err, runCtx.Err() != nil, c, err.Error())
			resp.close(err)
			return
		}
		body, now = dec, decoding.net.stamp
	}
	if rec.NonStreaming {
		rerr := r.readWhole(ex, body, now)
		o.Stage = record.StageBody
		o.verdict(ex.stream)
		if rerr != nil {
			o.bodyFailed(decoding, rerr, runCtx.Err() != nil, c, fmt.Sprintf("reading the response body after %d bytes: %v", len(ex.resp), rerr))
		}
		resp.close(rerr)
		return
	}
	if ct := resp.Header.ContentType(); bytes.HasPrefix(ct, []byte("application/json")) {
		b, err := io.ReadAll(io.LimitReader(body, 4<<10))
		o.Stage, o.msg = record.StageNotStreaming, fmt.Sprintf("server answered without streaming (Content-Type: %s): %s", ct, snippetOf(bytes.TrimSpace(b)))
		resp.close(errors.Join(errors.New("discarding a JSON body"), err))
		return
	}
	var rerr error
	pushed := false
	if decoding == nil && pushable(c) { // push.go: the poller reads it
		pushed, rerr = r.readPushed(c, resp, ex)
	}
	if !pushed {
		rerr = ex.stream.ReadBody(body, ex.buf, now)
	}
	ex.stream.Fill(rec)
	o.Stage = record.StageBody
	o.verdict(ex.stream)
	if rerr != nil {
		o.bodyFailed(decoding, rerr, runCtx.Err() != nil, c, fmt.Sprintf("reading the stream after %d events: %v", len(rec.EventNs), rerr))
	}
	resp.close(rerr)
}

// maxJSONBody bounds a non-streaming response body.
const maxJSONBody = 64 << 20

// readWhole reads a non-streaming response body into ex.resp and parses it
// as one event stamped when the body was completely read: the record's
// EventNs is that instant, its EventTokens the completion tokens (usage,
// exact, or counted from the text). A read error leaves the record as
// Fill makes it from what arrived.
func (r *Runner) readWhole(ex *exchange, body io.Reader, now func() int64) error {
	ex.resp = ex.resp[:0]
	var err error
	for {
		if len(ex.resp) == cap(ex.resp) {
			ex.resp = append(ex.resp, 0)[:len(ex.resp)]
		}
		var n int
		n, err = body.Read(ex.resp[len(ex.resp):cap(ex.resp)])
		ex.resp = ex.resp[:len(ex.resp)+n]
		if err != nil || len(ex.resp) > maxJSONBody {
			break
		}
	}
	done := now()
	if err == io.EOF {
		err = nil
	}
	if err == nil && len(ex.resp) > maxJSONBody {
		err = fmt.Errorf("the body is larger than %d bytes", maxJSONBody)
	}
	if err == nil {
		ex.stream.FeedJSON(bytes.TrimSpace(ex.resp), done)
	}
	ex.stream.Fill(&ex.rec)
	return err
}
