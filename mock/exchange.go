package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/tracekit/tracekit/clock"
)

// exchange is one completion request from body to last byte. Its fields
// are owned by the handler goroutine.
type exchange struct {
	s    *Server
	w    http.ResponseWriter
	rc   *http.ResponseController
	r    *http.Request
	ctx  context.Context
	chat bool

	req      *apiRequest
	p        prompt
	fault    Fault
	rng      *rand.Rand
	timer    *time.Timer
	e        LogEntry
	admitted bool

	// Stream encoding: head opens every chunk up to the inside of
	// choices[0]; buf is reused for every event.
	head, usageHead []byte
	buf             []byte

	// The event loop's state, owned by the handler goroutine or, while
	// the stream is on it, by a scheduler.
	sched        int64 // when event sent is due
	ev           int   // events planned
	sent, tok    int   // events and tokens sent so far
	take         int   // tokens of the prepared event
	role         bool  // the prepared event is chat's role chunk
	cached       bool  // the prompt is in the prefix cache
	pendingEvent bool  // the last write attempted was an event, not a malformed one
	conn         net.Conn
	gz           *gzip.Writer   // non-nil when the stream is gzipped (the gzip fault)
	raw          *rawWriter     // non-nil while a scheduler writes the stream
	heapIdx      int            // position in the scheduler's heap, -1 if out
	back         chan streamEnd // the scheduler hands the stream back here
	canceled     bool           // the handler took the stream back; guarded by the scheduler mutex
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	if !s.enter() {
		writeError(w, http.StatusServiceUnavailable, "the mock is shutting down", "")
		return
	}
	defer s.inflight.Done()
	x := &exchange{s: s, w: w, rc: http.NewResponseController(w), r: r, ctx: r.Context(), chat: chat, heapIdx: -1}
	x.e = LogEntry{ArrivalMonoNs: clock.Mono(), ArrivalWallNs: clock.Wall(), Endpoint: "completions"}
	if chat {
		x.e.Endpoint = "chat"
	}
	x.run()
	if x.timer != nil {
		x.timer.Stop()
	}
	if x.admitted {
		<-s.slots
		s.m.running.Add(-1)
	}
}

// run validates the request, applies a fault, and answers.
func (x *exchange) run() {
	s := x.s
	s.m.requests.Add(1)
	id := x.r.Header.Get("X-Request-Id")
	if id == "" {
		id = s.newID()
	}
	x.e.RequestID = id
	x.w.Header().Set("X-Request-Id", id)

	body, err := io.ReadAll(http.MaxBytesReader(x.w, x.r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			x.reject(&badRequest{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit)})
			return
		}
		x.e.Error = "reading request body: " + err.Error()
		x.finish(OutcomeClientGone)
		return
	}
	if s.cfg.KeepBodies {
		x.e.Body = body
	}
	if x.req, err = parseRequest(body, x.chat); err != nil {
		x.reject(err)
		return
	}
	x.e.Model, x.e.Stream = x.req.Model, x.req.Stream
	if x.e.Model == "" {
		x.e.Model = s.cfg.Model
	}
	if s.cfg.StrictModel && x.e.Model != s.cfg.Model {
		x.reject(&badRequest{status: http.StatusNotFound, param: "model", msg: fmt.Sprintf("The model `%s` does not exist.", x.e.Model)})
		return
	}
	if x.p, err = buildPrompt(x.req, x.chat, s.tokens); err != nil {
		x.reject(err)
		return
	}
	x.e.Messages, x.e.MessagesHash, x.e.PromptTokens = int32(x.p.messages), hashHex(x.p.hash), int32(x.p.tokens)
	maxTokens, err := x.maxTokens()
	if err != nil {
		x.reject(err)
		return
	}
	x.rng = requestRand(s.cfg.Seed, id, x.p.hash)
	n, finish := s.cfg.Latency.outputLength(x.rng, maxTokens, x.req.IgnoreEOS)
	x.e.MaxTokens, x.e.CompletionTokens, x.e.FinishReason = int32(maxTokens), int32(n), finish

	if h := x.r.Header.Get(FaultHeader); h != "" {
		if x.fault, err = ParseFault(h); err != nil {
			x.reject(invalid("", "%v", err))
			return
		}
	} else {
		x.fault = drawFault(x.rng, s.cfg.Faults, x.plannedEvents())
	}
	x.e.Fault = x.fault.String()
	if x.fault.Kind != FaultNone {
		s.m.faults.Add(1)
	}
	switch x.fault.Kind {
	case FaultStatus:
		x.e.Status = int32(x.fault.Status)
		x.finish(OutcomeFault)
		writeError(x.w, x.fault.Status, "injected fault "+x.fault.String(), "")
		return
	case FaultReset:
		x.finish(OutcomeFault)
		x.abort(true)
		return
	case FaultNoHeaders:
		x.silent()
		return
	case FaultCloseAfter:
		x.planConn(connPlan{closeAfter: true})
	case FaultIdleClose:
		x.planConn(connPlan{idleClose: x.fault.For})
	case FaultSlowHeaders:
		if !x.sleepUntil(clock.Mono() + int64(x.fault.For)) {
			x.interrupted()
			return
		}
	}
	if x.req.Stream && x.fault.Kind != FaultJSON {
		x.stream()
	} else {
		x.unary()
	}
}

// maxTokens applies max_completion_tokens / max_tokens and the context
// length the way vLLM does.
func (x *exchange) maxTokens() (int, error) {
	limit := x.s.cfg.Latency.MaxModelLen
	asked := x.req.MaxCompletionTokens
	if asked == nil {
		asked = x.req.MaxTokens
	}
	if asked == nil {
		if x.p.tokens >= limit {
			return 0, invalid("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, x.p.tokens)
		}
		return limit - x.p.tokens, nil
	}
	if x.p.tokens+*asked > limit {
		return 0, invalid("max_tokens", "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", limit, x.p.tokens+*asked, x.p.tokens, *asked)
	}
	return *asked, nil
}

// plannedEvents is the number of events with choices: the chat role chunk,
// one event for the first token, then one per TokensPerEvent tokens.
func (x *exchange) plannedEvents() int {
	n, k := int(x.e.CompletionTokens), x.s.cfg.Latency.TokensPerEvent
	ev := 1 + (n-1+k-1)/k
	if x.chat {
		ev++
	}
	return ev
}

// admit waits for a batch slot (FIFO among waiters).
func (x *exchange) admit() bool {
	s := x.s
	select {
	case s.slots <- struct{}{}:
	default:
		s.m.waiting.Add(1)
		select {
		case s.slots <- struct{}{}:
			s.m.waiting.Add(-1)
		case <-x.ctx.Done():
			s.m.waiting.Add(-1)
			return false
		}
	}
	s.m.running.Add(1)
	x.admitted = true
	x.e.AdmitMonoNs = clock.Mono()
	return true
}

// prefill looks the prompt up in the prefix cache and returns when the
// first token is due: admission + PrefillBase + PrefillPerToken*uncached.
func (x *exchange) prefill() int64 {
	s := x.s
	cached := min(s.cache.lookup(x.p.segs), max(x.p.tokens-1, 0))
	x.e.CachedTokens = int32(cached)
	s.m.promptTokens.Add(int64(x.p.tokens))
	s.m.cacheQueries.Add(int64(x.p.tokens))
	s.m.cacheHits.Add(int64(cached))
	first := x.e.AdmitMonoNs + int64(s.cfg.Latency.prefill(x.p.tokens-cached))
	x.e.PlannedTTFTNs = first - x.e.ArrivalMonoNs
	return first
}

// sleepUntil waits until the monotonic time t; false if the request ended.
func (x *exchange) sleepUntil(t int64) bool {
	d := time.Duration(t - clock.Mono())
	if d <= 0 {
		return x.ctx.Err() == nil
	}
	if x.timer == nil {
		x.timer = time.NewTimer(d)
	} else {
		x.timer.Reset(d)
	}
	select {
	case <-x.timer.C:
		return true
	case <-x.ctx.Done():
		return false
	}
}

// interrupted records a request whose context ended: the server closing,
// or the client going away.
func (x *exchange) interrupted() {
	if x.s.ctx.Err() != nil {
		x.finish(OutcomeCanceled)
		x.abort(false)
		return
	}
	x.finish(OutcomeClientGone)
}

// finish stamps and records the entry.
func (x *exchange) finish(outcome string) {
	x.e.Outcome = outcome
	x.e.DoneMonoNs = clock.Mono()
	x.s.record(&x.e)
}

// reject answers a bad request with vLLM's error body.
func (x *exchange) reject(err error) {
	var br *badRequest
	if !errors.As(err, &br) {
		br = invalid("", "%v", err)
	}
	x.e.Status, x.e.Error = int32(br.status), br.msg
	x.finish(OutcomeBadRequest)
	writeError(x.w, br.status, br.msg, br.param)
}

// abort closes the connection without finishing the response; reset sends
// a TCP RST instead of a FIN.
func (x *exchange) abort(reset bool) {
	conn, _, err := x.rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // net/http then drops the connection
	}
	if tc, ok := conn.(interface{ SetLinger(int) error }); ok && reset {
		tc.SetLinger(0)
	}
	conn.Close()
}

// silent answers nothing: it holds the connection until the client goes
// away or the server closes, then drops it without a byte.
func (x *exchange) silent() {
	<-x.ctx.Done()
	if x.s.ctx.Err() != nil {
		x.finish(OutcomeCanceled)
	} else {
		x.finish(OutcomeFault)
	}
	x.abort(false)
}

// planConn asks for p to be done with the connection after the response.
func (x *exchange) planConn(p connPlan) {
	if c, ok := x.ctx.Value(connKey{}).(*trackedConn); ok {
		c.plan(p)
	}
}

// errorTypes are the OpenAI error types vLLM uses per status.
var errorTypes = map[int]string{
	400: "BadRequestError", 404: "NotFoundError", 413: "BadRequestError",
	429: "RateLimitError", 500: "InternalServerError", 503: "ServiceUnavailableError",
}

// writeError writes vLLM's error body:
// {"error":{"message":..., "type":..., "param":..., "code":status}}.
func writeError(w http.ResponseWriter, status int, msg, param string) {
	var p any
	if param != "" {
		p = param
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": errorTypes[status], "param": p, "code": status,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// text returns the generated text of tokens [from, to); the end-of-text
// token of a "stop" finish has none.
func (x *exchange) appendText(b []byte, from, to int) []byte {
	textTokens := int(x.e.CompletionTokens)
	if x.e.FinishReason == "stop" {
		textTokens--
	}
	for i := from; i < min(to, textTokens); i++ {
		b = append(b, ' ')
		b = append(b, word(x.s.cfg.Seed, x.p.hash, i)...)
	}
	return b
}

// cacheAnswer caches the prompt and, for chat, the answer as the next
// history segment: turn k+1 of a conversation then hits turn k's answer.
func (x *exchange) cacheAnswer() {
	segs := x.p.segs
	if x.chat && x.s.cache.capacity > 0 {
		text := string(x.appendText(nil, 0, int(x.e.CompletionTokens)))
		segs = append(segs[:len(segs):len(segs)], segment{chain(x.p.hash, "assistant", text), x.p.tokens + x.s.tokens.Count(text)})
	}
	x.s.cache.insert(segs)
}

// unary answers a non-streaming request after the whole generation time.
func (x *exchange) unary() {
	if !x.admit() {
		x.interrupted()
		return
	}
	first := x.prefill()
	if !x.sleepUntil(first) {
		x.interrupted()
		return
	}
	x.s.cache.insert(x.p.segs)
	end := first
	for range int(x.e.CompletionTokens) - 1 {
		end += int64(x.s.cfg.Latency.itl(x.rng, int(x.s.m.running.Load())))
	}
	if x.fault.Kind == FaultStall {
		end += int64(x.fault.For)
	}
	if !x.sleepUntil(end) {
		x.interrupted()
		return
	}
	x.s.m.genTokens.Add(int64(x.e.CompletionTokens))
	if x.fault.Kind == FaultDisconnect {
		x.finish(OutcomeFault)
		x.abort(false)
		return
	}
	text := string(x.appendText(nil, 0, int(x.e.CompletionTokens)))
	x.cacheAnswer()
	body := x.unaryBody(text)
	if x.fault.Kind == FaultMalformed {
		body = body[:len(body)/2]
	}
	x.e.Status = http.StatusOK
	x.e.HeadersMonoNs = clock.Mono()
	outcome := OutcomeOK
	switch x.fault.Kind {
	case FaultNone, FaultNoDone, FaultSlowHeaders, FaultCloseAfter, FaultIdleClose:
	case FaultJSON:
		if x.req.Stream {
			outcome = OutcomeFault
		}
	default:
		outcome = OutcomeFault
	}
	if x.fault.Kind == FaultGzip {
		body = gzipBytes(body)
		x.w.Header().Set("Content-Encoding", "gzip")
	}
	x.finish(outcome)
	x.w.Header().Set("Content-Type", "application/json")
	x.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	x.w.Write(body)
}

func (x *exchange) usage() map[string]any {
	c := int(x.e.CompletionTokens)
	return map[string]any{
		"prompt_tokens": x.p.tokens, "completion_tokens": c, "total_tokens": x.p.tokens + c,
		"prompt_tokens_details": map[string]any{"cached_tokens": x.e.CachedTokens},
	}
}

func (x *exchange) unaryBody(text string) []byte {
	created := time.Now().Unix()
	var v map[string]any
	if x.chat {
		v = map[string]any{
			"id": "chatcmpl-" + x.e.RequestID, "object": "chat.completion", "created": created, "model": x.e.Model,
			"choices": []any{map[string]any{
				"index": 0, "message": map[string]any{"role": "assistant", "content": text, "tool_calls": []any{}},
				"logprobs": nil, "finish_reason": x.e.FinishReason, "stop_reason": nil,
			}},
			"usage": x.usage(), "prompt_logprobs": nil,
		}
	} else {
		v = map[string]any{
			"id": "cmpl-" + x.e.RequestID, "object": "text_completion", "created": created, "model": x.e.Model,
			"choices": []any{map[string]any{
				"index": 0, "text": text, "logprobs": nil, "finish_reason": x.e.FinishReason, "stop_reason": nil,
			}},
			"usage": x.usage(),
		}
	}
	b, _ := json.Marshal(v)
	return b
}

// jsonString appends s as a JSON string.
func jsonString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// buildHeads prepares the constant part of every chunk of this stream.
func (x *exchange) buildHeads() {
	id, object := "cmpl-"+x.e.RequestID, "text_completion"
	if x.chat {
		id, object = "chatcmpl-"+x.e.RequestID, "chat.completion.chunk"
	}
	h := append([]byte(nil), `data: {"id":`...)
	h = jsonString(h, id)
	h = append(h, `,"object":"`+object+`","created":`...)
	h = strconv.AppendInt(h, time.Now().Unix(), 10)
	h = append(h, `,"model":`...)
	h = jsonString(h, x.e.Model)
	x.usageHead = append(append([]byte(nil), h...), `,"choices":[],"usage":`...)
	x.head = append(h, `,"choices":[{"index":0,`...)
	x.buf = make([]byte, 0, 512)
}

// appendUsage appends the usage object with completion tokens so far.
func (x *exchange) appendUsage(b []byte, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(x.p.tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(x.p.tokens+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(x.e.CachedTokens), 10)
	return append(b, "}}"...)
}

// appendEvent encodes the chunk carrying tokens [from, to); role marks the
// chat role-only chunk.
func (x *exchange) appendEvent(b []byte, from, to int, role bool) []byte {
	b = append(b, x.head...)
	last := to == int(x.e.CompletionTokens) && !role
	if x.chat {
		if role {
			b = append(b, `"delta":{"role":"assistant","content":""}`...)
		} else {
			b = append(b, `"delta":{"content":"`...)
			b = append(x.appendText(b, from, to), `"}`...)
		}
	} else {
		b = append(b, `"text":"`...)
		b = append(x.appendText(b, from, to), '"')
	}
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if last {
		b = append(append(append(b, '"'), x.e.FinishReason...), '"')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"stop_reason":null}]`...)
	if so := x.req.StreamOptions; so != nil && so.ContinuousUsageStats {
		b = x.appendUsage(append(b, `,"usage":`...), to)
	} else if so != nil && so.IncludeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// streamEnd says how a stream's event loop ended.
type streamEnd int

const (
	endDone        streamEnd = iota // every event sent; the tail follows
	endWriteFailed                  // a write failed: the client is gone
	endDisconnect                   // the injected disconnect fault
	endCanceled                     // the request's context ended
	endSlow                         // a scheduler write would block; raw.rest() is unwritten
)

// prepare plans event x.sent: its tokens and the time it is due, then
// applies the positional fault before it. It returns false with the end
// once the stream has no event left.
func (x *exchange) prepare() (streamEnd, bool) {
	if x.sent < x.ev {
		x.role = x.chat && x.sent == 0
		x.take = 0
		if !x.role {
			x.take = min(x.s.cfg.Latency.TokensPerEvent, int(x.e.CompletionTokens)-x.tok)
			if x.tok == 0 {
				x.take = 1 // the first token comes alone, out of prefill
			} else {
				for range x.take {
					x.sched += int64(x.s.cfg.Latency.itl(x.rng, int(x.s.m.running.Load())))
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
	f := x.fault
	if f.After != x.sent {
		return 0, true
	}
	switch f.Kind {
	case FaultStall:
		x.sched += int64(f.For)
	case FaultMalformed:
		bad := append(append([]byte(nil), x.head...), `"delta":{"content":"unterminated`+"\n\n"...)
		x.pendingEvent = false
		return x.write(bad)
	case FaultDisconnect:
		return endDisconnect, false
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
	x.buf = x.appendEvent(x.buf[:0], x.tok, x.tok+x.take, x.role)
	x.pendingEvent = true
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

// logEvent records the prepared event as written at now and moves on.
func (x *exchange) logEvent(now int64) {
	late := max(now-x.sched, 0)
	x.e.EventMonoNs = append(x.e.EventMonoNs, now)
	x.e.EventTokens = append(x.e.EventTokens, int32(x.take))
	x.e.EventLatenessNs = append(x.e.EventLatenessNs, late)
	x.s.m.lateness.Record(late)
	x.s.m.events.Add(1)
	x.s.m.genTokens.Add(int64(x.take))
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

// gzipBytes compresses a whole body.
func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
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
	if !x.pendingEvent {
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
	if x.fault.Kind == FaultGzip {
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
	x.buildHeads()
	x.ev = x.plannedEvents()
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
	}
	x.cacheAnswer()
	outcome := OutcomeOK
	switch x.fault.Kind {
	case FaultNone, FaultSlowHeaders, FaultStall, FaultCloseAfter, FaultIdleClose:
	default:
		outcome = OutcomeFault
	}
	x.finish(outcome)
	var tail []byte
	if so := x.req.StreamOptions; so != nil && (so.IncludeUsage || so.ContinuousUsageStats) {
		tail = append(x.appendUsage(append(x.buf[:0], x.usageHead...), int(x.e.CompletionTokens)), "}\n\n"...)
	}
	if x.fault.Kind != FaultNoDone {
		tail = append(tail, "data: [DONE]\n\n"...)
	}
	if len(tail) > 0 {
		x.writeRaw(tail)
	}
	if x.gz != nil {
		x.gz.Close() // the gzip trailer
		x.rc.Flush()
	}
}
