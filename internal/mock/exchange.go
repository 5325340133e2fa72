package mock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/tracekit/tracekit/internal/clock"
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
	eff      effect // what the fault does to the response
	rng      *rand.Rand
	timer    *time.Timer
	e        LogEntry
	admitted bool
	kvHeld   int64 // tokens counted in metrics.kvTokens for this request
	// toolNames are the function names of the answer's tool calls (tools.go);
	// empty for a content answer.
	toolNames []string

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
	lastTokNs    int64 // when the last event with tokens was written
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
		s.m.kvTokens.Add(-x.kvHeld)
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
	if x.chat {
		calls, names, err := x.toolPlan(x.r.Header.Get(ToolCallsHeader), x.r.Header.Get(ToolNamesHeader))
		if err != nil {
			x.reject(err)
			return
		}
		if calls = min(calls, n); calls > 0 {
			// Every output token is argument text (no end-of-text token)
			// and the calls end exactly there, whether the length was
			// drawn or max_tokens.
			x.toolNames, x.e.ToolCalls, x.e.FinishReason = names[:calls], int32(calls), "tool_calls"
		}
	}

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
	x.eff = x.fault.outcome(x.req.Stream, x.plannedEvents())
	switch {
	case x.eff.status != 0:
		x.e.Status = int32(x.eff.status)
		x.finish(OutcomeFault)
		writeError(x.w, x.eff.status, "injected fault "+x.fault.String(), "")
		return
	case x.eff.reset:
		x.finish(OutcomeFault)
		x.abort(true)
		return
	case x.eff.silent:
		x.silent()
		return
	}
	if x.eff.conn != (connPlan{}) {
		x.planConn(x.eff.conn)
	}
	if x.eff.headerDelay > 0 && !x.sleepUntil(clock.Mono()+int64(x.eff.headerDelay)) {
		x.interrupted()
		return
	}
	if x.req.Stream && !x.eff.unary {
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
	x.holdKV(x.p.tokens)
	return true
}

// holdKV counts n more tokens of this request in the KV-cache usage model.
func (x *exchange) holdKV(n int) {
	x.kvHeld += int64(n)
	x.s.m.kvTokens.Add(int64(n))
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

// finish stamps and records the entry; a request that got a batch slot
// counts in the end-to-end and queue time histograms, as a finished or
// aborted request does in vLLM.
func (x *exchange) finish(outcome string) {
	x.e.Outcome = outcome
	x.e.DoneMonoNs = clock.Mono()
	if x.admitted {
		x.s.m.e2e.observe(x.e.DoneMonoNs - x.e.ArrivalMonoNs)
		x.s.m.queue.observe(x.e.AdmitMonoNs - x.e.ArrivalMonoNs)
	}
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

// cacheAnswer caches the prompt and, for chat, the answer as the next
// history segment: turn k+1 of a conversation then hits turn k's answer.
func (x *exchange) cacheAnswer() {
	segs := x.p.segs
	if x.chat && x.s.cache.capacity > 0 {
		var text string // a tool-call answer is sent back with content null
		if len(x.toolNames) == 0 {
			text = string(x.appendText(nil, 0, int(x.e.CompletionTokens)))
		}
		segs = append(segs[:len(segs):len(segs)], segment{chain(x.p.hash, "assistant", text), x.p.tokens + x.s.tokens.Count(text)})
	}
	x.s.cache.insert(segs)
}
