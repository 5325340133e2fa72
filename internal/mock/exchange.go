package mock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apis"
	"github.com/tracekit/tracekit/internal/api/transcription"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// exchange is one request from body to last byte. Its fields are owned
// by the handler goroutine.
type exchange struct {
	s   *Server
	w   http.ResponseWriter
	rc  *http.ResponseController
	r   *http.Request
	ctx context.Context
	api api.Name

	// lat is the latency of the request's model (Config.Models).
	lat  *Latency
	req  *genRequest  // a generating API's request
	pool *poolRequest // a non-generating API's (embeddings, rerank, score)
	p    prompt
	// media are the prompt tokens of the request's media by kind, which
	// the usage reports as vLLM's does (multimodal_tokens)
	media    api.MediaTokens
	fault    Fault
	eff      effect // what the fault does to the response
	rng      *rand.Rand
	timer    *time.Timer
	e        LogEntry
	admitted bool
	kvHeld   int64 // tokens counted in metrics.kvTokens for this request
	// reasoning is how many output tokens, the first ones, are reasoning.
	reasoning int
	// toolNames are the function names of the answer's tool calls (tools.go);
	// empty for a content answer.
	toolNames []string
	// history is the transcript of the Responses request named by
	// previous_response_id, before the request's own messages.
	history []Message

	// Stream encoding: the API's encoder, what it is told of the
	// response, and buffers reused for every event.
	enc   api.Encoder
	head  api.Head
	begun bool // the encoder's Begin went out
	buf   []byte
	text  []byte // the text of the event being encoded

	// The event loop's state, owned by the handler goroutine or, while
	// the stream is on it, by a scheduler.
	sched       int64  // when event sent is due
	ev          int    // events planned
	sent, tok   int    // events and tokens sent so far
	take        int    // tokens of the prepared event
	specSeed    uint64 // speculative decoding: the draws of every step (Latency.SpecK > 0)
	role        bool   // the prepared event is chat's role chunk
	cached      bool   // the prompt is in the prefix cache
	pending     pendingWrite
	lastTokNs   int64 // when the last event with tokens was written
	firstAnswer int   // index of the first logged event with answer tokens, -1 before
	conn        net.Conn
	gz          *gzip.Writer   // non-nil when the stream is gzipped (the gzip fault)
	raw         *rawWriter     // non-nil while a scheduler writes the stream
	heapIdx     int            // position in the scheduler's heap, -1 if out
	back        chan streamEnd // the scheduler hands the stream back here
	canceled    bool           // the handler took the stream back; guarded by the scheduler mutex
}

// pendingWrite is what the last write a scheduler attempted carried.
type pendingWrite int

const (
	pendingEvent     pendingWrite = iota // a planned event
	pendingMalformed                     // the malformed fault's event; the planned one follows
)

// generating reports whether the request's API generates tokens.
func (x *exchange) generating() bool { return x.enc != nil }

// speech reports whether the request is speech-to-text (a multipart
// upload, a transcript).
func (x *exchange) speech() bool { return x.api == api.Transcriptions || x.api == api.Translations }

func (s *Server) complete(w http.ResponseWriter, r *http.Request, spec *apis.Spec) {
	x := &exchange{s: s, w: w, rc: http.NewResponseController(w), r: r, ctx: r.Context(), api: spec.Name, heapIdx: -1, firstAnswer: -1}
	if !s.enter() {
		x.writeError(http.StatusServiceUnavailable, "the mock is shutting down", "")
		return
	}
	defer s.inflight.Done()
	if spec.NewEncoder != nil {
		x.enc = spec.NewEncoder()
	}
	if e, ok := x.enc.(*transcription.Encoder); ok {
		e.SetShape(transcription.Shape(s.cfg.TranscriptionStream))
	}
	x.e = LogEntry{ArrivalMonoNs: clock.Mono(), ArrivalWallNs: clock.Wall(), Endpoint: string(spec.Name)}
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
	if x.api == api.Messages {
		x.w.Header().Set("Request-Id", id) // Anthropic's header
	}

	body, err := readBody(http.MaxBytesReader(x.w, x.r.Body, s.cfg.MaxBodyBytes), min(x.r.ContentLength, s.cfg.MaxBodyBytes))
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
	if err := x.checkHeaders(); err != nil {
		x.reject(err)
		return
	}
	switch {
	case x.speech():
		x.req, err = parseSpeech(body, x.r.Header.Get("Content-Type"))
	case x.generating():
		x.req, err = parseRequest(body, x.api)
	default:
		x.pool, err = parsePool(body, x.api, s.tokens, s.cfg.EmbeddingDimensions)
	}
	if err != nil {
		x.reject(err)
		return
	}
	if x.generating() {
		x.e.Model, x.e.Stream = x.req.Model, x.req.Stream
	} else {
		x.e.Model = x.pool.Model
	}
	if x.e.Model == "" {
		x.e.Model = s.cfg.Model
	}
	lat, served := s.latency[x.e.Model]
	if !served && s.cfg.StrictModel {
		x.reject(&badRequest{status: http.StatusNotFound, param: "model", msg: fmt.Sprintf("The model `%s` does not exist.", x.e.Model)})
		return
	}
	if !served {
		lat = s.latency[s.cfg.Model]
	}
	x.lat = lat
	if x.generating() {
		if err := x.planAnswer(id); err != nil {
			x.reject(err)
			return
		}
	} else {
		x.p = x.pool.prompt()
		x.e.Messages, x.e.MessagesHash, x.e.PromptTokens = int32(x.p.messages), hashHex(x.p.hash), int32(x.p.tokens)
		x.rng = requestRand(s.cfg.Seed, id, x.p.hash)
		x.ev = 1 // the body: positional faults at 0 or 1 act on it
	}

	if h := x.r.Header.Get(FaultHeader); h != "" {
		if x.fault, err = ParseFault(h); err != nil {
			x.reject(invalid("", "%v", err))
			return
		}
	} else {
		x.fault = drawFault(x.rng, s.cfg.Faults, x.ev)
	}
	x.e.Fault = x.fault.String()
	if x.fault.Kind != FaultNone {
		s.m.faults.Add(1)
	}
	x.eff = x.fault.outcome(x.e.Stream, x.ev)
	switch {
	case x.eff.status != 0:
		x.e.Status = int32(x.eff.status)
		x.finish(OutcomeFault)
		x.writeError(x.eff.status, "injected fault "+x.fault.String(), "")
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
	switch {
	case !x.generating():
		x.poolAnswer()
	case x.req.Stream && !x.eff.unary:
		x.stream()
	default:
		x.unary()
	}
}

// planAnswer builds a generating request's prompt and plans its answer:
// the output length, the reasoning tokens among it, the tool calls, the
// events.
func (x *exchange) planAnswer(id string) error {
	s := x.s
	msgs := x.req.msgs
	if x.req.previous != "" {
		var ok bool
		if x.history, ok = s.store.get(x.req.previous); !ok {
			return &badRequest{status: http.StatusNotFound, param: "previous_response_id",
				msg: fmt.Sprintf("Response with id '%s' not found.", x.req.previous)}
		}
		// instructions (a first system message) are the request's own,
		// before the history: they do not carry over.
		var sys []Message
		if len(msgs) > 0 && msgs[0].Role == "system" && x.api == api.Responses {
			sys, msgs = msgs[:1], msgs[1:]
		}
		x.req.msgs = append(append(append([]Message(nil), sys...), x.history...), msgs...)
		x.history = append(append([]Message(nil), x.history...), msgs...)
		// The request's own messages, and their media, follow the history.
		for i := range x.req.media {
			if x.req.media[i].msg >= len(sys) {
				x.req.media[i].msg += len(x.req.msgs) - len(msgs) - len(sys)
			}
		}
	} else if x.api == api.Responses {
		x.history = msgs
		if len(msgs) > 0 && msgs[0].Role == "system" {
			x.history = msgs[1:]
		}
	}
	items, err := s.media.resolveMedia(x.ctx, x.req.media)
	if err != nil {
		return err
	}
	x.req.media = nil // their data, megabytes each, is not held while the answer streams
	if x.p, err = buildPrompt(x.req, items, s.tokens); err != nil {
		return err
	}
	x.e.Messages, x.e.MessagesHash, x.e.PromptTokens = int32(x.p.messages), hashHex(x.p.hash), int32(x.p.tokens)
	for _, it := range items {
		if e, ok := x.enc.(*transcription.Encoder); ok {
			e.SetSeconds((it.ms + 999) / 1000) // vLLM's usage: whole seconds of audio
		}
		x.e.MediaItems++
		x.e.MediaTokens += int32(it.tokens)
		switch it.kind {
		case trace.MediaImage:
			x.media.Image += int64(it.tokens)
		case trace.MediaVideo:
			x.media.Video += int64(it.tokens)
		case trace.MediaAudio:
			x.media.Audio += int64(it.tokens)
		}
		x.e.MediaBytes += int64(it.bytes)
	}
	maxTokens, err := x.maxTokens()
	if err != nil {
		return err
	}
	reasoning, err := x.reasoningTokens()
	if err != nil {
		return err
	}
	x.rng = requestRand(s.cfg.Seed, id, x.p.hash)
	if !x.req.noReasoning && reasoning < 0 && x.lat.ReasoningMean > 0 {
		reasoning = x.lat.reasoningLength(x.rng)
	}
	reasoning = max(reasoning, 0)
	if x.req.budget > 0 {
		reasoning = min(reasoning, x.req.budget)
	}
	x.reasoning = min(reasoning, maxTokens)
	n, finish := x.reasoning, "length" // the limit reached while reasoning
	if x.reasoning < maxTokens {
		n, finish = x.lat.outputLength(x.rng, maxTokens-x.reasoning, x.req.IgnoreEOS)
		n += x.reasoning
	}
	x.e.MaxTokens, x.e.CompletionTokens, x.e.FinishReason, x.e.ReasoningTokens = int32(maxTokens), int32(n), finish, int32(x.reasoning)
	if x.api != api.Completions {
		calls, names, err := x.toolPlan(x.r.Header.Get(ToolCallsHeader), x.r.Header.Get(ToolNamesHeader))
		if err != nil {
			return err
		}
		if calls = min(calls, n-x.reasoning); calls > 0 {
			// Every answer token is argument text (no end-of-text token)
			// and the calls end exactly there, whether the length was
			// drawn or max_tokens.
			x.toolNames, x.e.ToolCalls, x.e.FinishReason = names[:calls], int32(calls), "tool_calls"
		}
	}
	if x.lat.SpecK > 0 {
		x.specSeed = x.rng.Uint64() // drawn last: without speculation the other draws are unchanged
	}
	x.ev = x.plannedEvents()
	return nil
}

// maxTokens applies the request's output limit (chat: max_completion_tokens,
// else max_tokens) and the context length the way vLLM does.
func (x *exchange) maxTokens() (int, error) {
	limit := x.lat.MaxModelLen
	asked, param := x.req.MaxTokens, x.req.maxParam
	if asked == nil {
		if x.p.tokens >= limit {
			return 0, invalid("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, x.p.tokens)
		}
		return limit - x.p.tokens, nil
	}
	if x.p.tokens+*asked > limit {
		return 0, invalid(param, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", limit, x.p.tokens+*asked, x.p.tokens, *asked)
	}
	return *asked, nil
}

// reasoningTokens reads ReasoningHeader: -1 when absent.
func (x *exchange) reasoningTokens() (int, error) {
	h := strings.TrimSpace(x.r.Header.Get(ReasoningHeader))
	if h == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(h)
	if err != nil || n < 0 {
		return 0, invalid("", "%s %q: expected a number of reasoning tokens, 0 or more", ReasoningHeader, h)
	}
	if x.req.noReasoning || x.api == api.Completions {
		return 0, nil
	}
	return n, nil
}

// takeAt is how many output tokens the event that starts at token tok
// carries: the first token comes alone, out of prefill; the others
// TokensPerEvent at a time, but an event never spans the end of the
// reasoning or of a tool call, so each is one kind of piece, as a vLLM
// delta of reasoning, text or one tool call is.
func (x *exchange) takeAt(tok int) int {
	if tok == 0 {
		return 1
	}
	width := x.lat.TokensPerEvent
	if l := x.lat; l.SpecK > 0 {
		width = 1 + specAccepted(x.specSeed, tok, l.SpecK, l.SpecAccept)
	}
	end := min(tok+width, int(x.e.CompletionTokens))
	switch {
	case tok < x.reasoning:
		end = min(end, x.reasoning)
	case len(x.toolNames) > 0:
		_, ct := x.toolSpan(x.callAt(tok))
		end = min(end, ct)
	}
	return end - tok
}

// plannedEvents is the number of events with output: the chat role chunk,
// then one per takeAt.
func (x *exchange) plannedEvents() int {
	ev := 0
	if x.api == api.Chat {
		ev++
	}
	for tok, n := 0, int(x.e.CompletionTokens); tok < n; tok += x.takeAt(tok) {
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
	s.m.mediaItems.Add(int64(x.e.MediaItems))
	s.m.mediaTokens.Add(int64(x.e.MediaTokens))
	s.m.cacheQueries.Add(int64(x.p.tokens))
	s.m.cacheHits.Add(int64(cached))
	first := x.e.AdmitMonoNs + int64(x.lat.prefill(x.p.tokens-cached))
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
	x.e.FirstAnswerEvent = int32(len(x.e.EventMonoNs))
	if x.firstAnswer >= 0 {
		x.e.FirstAnswerEvent = int32(x.firstAnswer)
	}
	x.e.DoneMonoNs = clock.Mono()
	if x.admitted {
		x.s.m.e2e.observe(x.e.DoneMonoNs - x.e.ArrivalMonoNs)
		x.s.m.queue.observe(x.e.AdmitMonoNs - x.e.ArrivalMonoNs)
	}
	x.s.record(&x.e)
}

// reject answers a bad request with the API's error body.
func (x *exchange) reject(err error) {
	var br *badRequest
	if !errors.As(err, &br) {
		br = invalid("", "%v", err)
	}
	x.e.Status, x.e.Error = int32(br.status), br.msg
	x.finish(OutcomeBadRequest)
	x.writeError(br.status, br.msg, br.param)
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

// cacheAnswer caches the prompt and, for a conversation (chat,
// Responses, Messages), the answer as the next history segment: turn k+1
// of a conversation then hits turn k's answer. A Responses answer's
// transcript is stored for a later previous_response_id.
func (x *exchange) cacheAnswer() {
	segs := x.p.segs
	if x.api != api.Completions && (x.s.cache.capacity > 0 || x.req.store) {
		var text string // a tool-call answer is sent back with content null
		if len(x.toolNames) == 0 {
			text = string(x.appendWords(nil, x.reasoning, int(x.e.CompletionTokens)))
		}
		if x.s.cache.capacity > 0 {
			segs = append(segs[:len(segs):len(segs)], segment{chain(x.p.hash, "assistant", text), x.p.tokens + x.s.tokens.Count(text)})
		}
		if x.api == api.Responses && x.req.store {
			x.s.store.put(responseID(x.e.RequestID), append(x.history[:len(x.history):len(x.history)], Message{"assistant", text}))
		}
	}
	x.s.cache.insert(segs)
}

// readBody reads r to its end into a buffer of size+1 bytes to begin with
// (size < 1: 512), grown as io.ReadAll grows one. A body of megabytes read
// from io.ReadAll's 512 bytes up was copied and zeroed at each of a dozen
// doublings: a fifth of the mock's CPU for requests with images.
func readBody(r io.Reader, size int64) ([]byte, error) {
	if size < 1 {
		size = 511
	}
	b := make([]byte, 0, size+1) // +1: the read that finds the end needs room
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
