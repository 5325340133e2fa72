package capture

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/fnv1a"
	"github.com/tracekit/tracekit/internal/record"

	"github.com/tracekit/tracekit/trace"
)

// account turns a finished exchange into a recording row and a trace turn.
// The conversation bookkeeping is done here, before the handler returns
// (a client sends its next turn only after this response ended); token
// counting, the slow part, runs on the accounting worker (accountWorker),
// which the segment waits for.
func (p *Proxy) account(seg *segment, ex *exchange, call *api.Call, r *http.Request) {
	if call == nil { // not a request of its API after all: forwarded, not recorded
		p.streams.Put(ex.stream)
		seg.inflight.Done()
		return
	}
	p.cfg.Scrub.AddHeaders(r.Header) // the key a hostile upstream may echo into the record
	res := &ex.res
	rec := &trace.Record{
		Target:     p.target,
		IntendedNs: ex.arrival - seg.origin, SlotNs: ex.arrival - seg.origin,
		SentNs: res.sentNs - seg.origin, DoneNs: res.doneNs - seg.origin,
		Status: int32(res.status), MaxTokens: call.MaxTokens, Endpoint: string(ex.spec.Name),
	}
	if res.headersNs != 0 {
		rec.HeadersNs = res.headersNs - seg.origin
	}
	// A non-streaming exchange (the request asked for one JSON body, or the
	// upstream answered a stream request with one) has a single event: the
	// body completely read, carrying every completion token.
	rec.NonStreaming = !call.Stream || (res.sendErr == nil && res.status/100 == 2 && !res.sse)
	answer := ex.stream.Text()
	answerMsg := trace.Message{Role: "assistant", Content: answer, ToolCalls: answerToolCalls(ex.stream)}
	turn := trace.Turn{ArrivalOffsetNs: ex.arrival - seg.origin, Model: call.Model, NonStreaming: !call.Stream,
		Tools: call.Tools, ToolChoice: call.ToolChoice}
	if ex.spec.Name != api.Chat && ex.spec.Name != api.Completions {
		// chat and completions turns keep "" (replay's --endpoint), as
		// before endpoints were recorded
		turn.Endpoint = string(ex.spec.Name)
	}
	respID := ex.stream.ResponseID()
	if !p.cfg.RedactContent {
		turn.ReferenceAnswer = answer
		turn.ReferenceToolCalls = answerMsg.ToolCalls
	}

	p.mu.Lock()
	p.reqSeq++
	rec.RequestID = r.Header.Get("X-Request-Id")
	if rec.RequestID == "" {
		rec.RequestID = fmt.Sprintf("cap-%d-%d", seg.n, p.reqSeq)
	}
	var c *conv
	histLen := 0
	var m match
	if p.cfg.SessionHeader != "" && r.Header.Get(p.cfg.SessionHeader) != "" {
		c = p.convs.session(r.Header.Get(p.cfg.SessionHeader))
		if c.seq > 0 && c.seg == seg {
			histLen = -1 // the client's history layout is unknown: keep the new tail below
		}
	} else if call.PreviousResponseID != "" {
		// a Responses request on server-held history: it continues the
		// turn whose answer had that id; its items are all new
		if pr := p.convs.byResponse(call.PreviousResponseID); pr != nil {
			m = match{c: pr.c, parents: []*turnRef{pr}}
			c = pr.c
		}
	} else if call.Conversation {
		m = p.convs.match(call.Messages)
		c, histLen = m.c, m.histLen
	}
	if c == nil {
		p.convSeq++
		c = &conv{id: fmt.Sprintf("conv-%d", p.convSeq)}
	}
	// a graph node: parents other than the latest turn, all in this segment
	graph := len(m.parents) > 1 || (len(m.parents) == 1 && m.parents[0].seq != c.seq-1)
	for _, pr := range m.parents {
		if pr.seg != seg || pr.seq < c.segBase {
			graph = false
		}
	}
	switch {
	case c.seg != seg || c.seq == 0: // first turn here: the whole history is this turn's messages
		c.seg, c.segBase, c.start = seg, c.seq, ex.arrival
		histLen = 0
		turn.ThinkTimeNs = 0
	case graph:
		last := int64(0)
		for _, pr := range m.parents {
			turn.Parents = append(turn.Parents, pr.seq-c.segBase)
			last = max(last, pr.done)
		}
		turn.ThinkTimeNs = max(0, ex.arrival-last)
	case len(m.parents) > 0 && m.parents[0].seq != c.seq-1:
		// continues an older turn of an earlier segment's conversation
		histLen = 0
		turn.ThinkTimeNs = max(0, ex.arrival-c.prevDone)
	default:
		turn.ThinkTimeNs = max(0, ex.arrival-c.prevDone)
	}
	if histLen < 0 { // session header: new messages are those after the last assistant message
		histLen = 0
		for i, m := range call.Messages {
			if m.Role == "assistant" {
				histLen = i + 1
			}
		}
	}
	seq := c.seq
	c.seq++
	c.prevDone = res.doneNs
	turn.ConversationID, turn.Turn = c.id, seq-c.segBase
	turn.StartOffsetNs = c.start - seg.origin
	if call.Conversation {
		ref := p.convs.register(c, seg, seq, call.Messages, answerMsg, res.doneNs)
		if respID != "" {
			p.convs.registerResponse(respID, ref)
		}
	}
	p.mu.Unlock()

	rec.ConversationID, rec.Turn = turn.ConversationID, turn.Turn
	turn.Messages = append([]trace.Message(nil), call.Messages[histLen:]...)
	// a Responses request chained by previous_response_id sends its
	// instructions again; the history replay rebuilds holds them already
	chained := call.PreviousResponseID != "" && turn.Turn > 0

	// The rest runs off the request path, on the accounting worker; the
	// segment waits for it.
	job := func() {
		defer seg.inflight.Done()
		defer p.streams.Put(ex.stream)
		ex.stream.Fill(rec)
		ex.stream.FillAnswer(rec)
		for i := range rec.EventNs {
			rec.EventNs[i] -= seg.origin
		}
		p.settle(rec, res, ex.stream)
		var all int32
		for i := range call.Messages {
			m := &call.Messages[i]
			if !m.Virtual { // token ids sent as such: their count is set
				m.Tokens = int32(messageTokens(p.tok.Count, m))
			}
			all += m.Tokens
		}
		rec.InputTokens = all
		for i := range turn.Messages {
			turn.Messages[i].Tokens = call.Messages[histLen+i].Tokens
		}
		if chained {
			turn.Messages = dropSystem(turn.Messages)
		}
		var bytes int64
		for i := range turn.Messages {
			m := &turn.Messages[i]
			turn.InputTokens += m.Tokens
			bytes += int64(len(m.Content))
			if p.cfg.RedactContent {
				m.Content = ""
				for j := range m.ToolCalls {
					m.ToolCalls[j].Arguments = ""
				}
			}
		}
		if ex.spec.Streams {
			turn.OutputTokens = outputTokens(rec, call, answer, p.tok.Count)
			if rec.ReasoningTokens > 0 && rec.ReasoningTokens <= turn.OutputTokens {
				turn.ReasoningTokens = rec.ReasoningTokens // replay's --mock-hints asks the mock for them
			}
		}
		if p.cfg.RedactContent {
			turn.PrefixHashes = p.prefixHashes(call.Messages)
		}
		bytes += int64(len(turn.ReferenceAnswer))
		w, err := seg.recorder()
		if err != nil {
			p.cfg.Logf("capture: %v (request %s not recorded)", err, rec.RequestID)
			return
		}
		if len(call.SkippedMedia) > 0 {
			p.skipMedia(rec.RequestID, len(call.SkippedMedia), call.SkippedMedia[0])
		}
		p.recordMedia(seg, turn.Messages, rec.RequestID) // the segment's files are named now
		w.Submit(rec)
		seg.addTurn(&turn, bytes+64)
	}
	select {
	case p.acct <- job:
	default:
		if p.acctStall.CompareAndSwap(false, true) {
			p.cfg.Logf("capture: %d finished requests wait for the disk; responses now wait for their records to be written", cap(p.acct))
		}
		p.acct <- job
	}
}

// settle writes rec's error kind and message from how the exchange went
// (res) and the parser's verdict on the upstream's body: the one place a
// captured record's error kind is set. record.Outcome, the classifier
// replay shares, decides the kind. The client going away is capture's
// cancellation; capture has no deadlines of its own, so every upstream
// failure is a transport one.
func (p *Proxy) settle(rec *trace.Record, res *fwdResult, st *record.Stream) {
	o := record.Outcome{Stage: record.StageBody, Done: st.Done()}
	var parsedMsg, msg string
	o.Parsed, parsedMsg = st.Verdict()
	switch {
	case res.sendErr != nil:
		o.Stage, o.Failure, o.Canceled = record.StageSend, record.FailTransport, res.clientGone
		msg = "upstream: " + res.sendErr.Error()
		if res.clientGone {
			msg = "the client went away before the upstream answered"
		}
	case res.status/100 != 2:
		o.Stage, msg = record.StageStatus, fmt.Sprintf("HTTP %d", res.status)
		if parsedMsg != "" {
			msg += ": " + parsedMsg
		}
	case res.undecoded != "":
		o.Failure = record.FailDecode
		msg = fmt.Sprintf("the response is %q-encoded, which capture does not decode (gzip and deflate it does): its events are not recorded", res.undecoded)
		if p.encWarned.CompareAndSwap(false, true) {
			p.cfg.Logf("capture: %s; forwarded untouched (warned once)", msg)
		}
	case res.clientGone:
		o.Failure, o.Canceled = record.FailTransport, true
		msg = fmt.Sprintf("the client went away after %d events", len(rec.EventNs))
	case res.readErr != nil:
		o.Failure = record.FailTransport
		msg = fmt.Sprintf("the upstream broke off after %d events: %v", len(rec.EventNs), res.readErr)
	case res.decodeErr != nil: // the body arrived whole: the decoder's own finding
		o.Failure, msg = record.FailDecode, "decoding the compressed body: "+res.decodeErr.Error()
	}
	kind, parsed := o.Kind()
	if parsed {
		msg = parsedMsg
	}
	rec.ErrorKind, rec.ErrorMessage = kind, msg
}

// accountWorker runs the accounting jobs in order until Close closes the
// queue. One worker keeps token counting and encoding, which come in
// bursts when many streams end together, to one core's worth of CPU: the
// forwarding goroutines keep the rest.
func (p *Proxy) accountWorker(jobs <-chan func()) {
	defer p.acctDone.Done()
	for job := range jobs {
		job()
	}
}

// toolCallsAppender is a parsed answer that knows its tool calls (the
// record.Stream does once it parses tool-call deltas).
type toolCallsAppender interface {
	AppendToolCalls(dst []trace.ToolCall) []trace.ToolCall
}

// answerToolCalls is the answer's tool calls, nil when it has none or the
// parser does not report them.
func answerToolCalls(s any) []trace.ToolCall {
	if a, ok := s.(toolCallsAppender); ok {
		return a.AppendToolCalls(nil)
	}
	return nil
}

// messageTokens counts a message's text and its tool calls' names and
// arguments.
func messageTokens(count func(string) int, m *trace.Message) int {
	n := count(m.Content)
	for _, c := range m.ToolCalls {
		n += count(c.Name) + count(c.Arguments)
	}
	return n
}

// RedactBlockSize is the tokens per PrefixHashes block of a redacted
// capture (vLLM's default KV block size), also in TraceMeta.Options.
const RedactBlockSize = 16

// prefixHashes describes a redacted prompt's prefix reuse: the prompt (all
// messages, roles included) is tokenized and cut into RedactBlockSize-token
// blocks; block i hashes the whole prefix up to its end, so two prompts
// share hash i exactly when they share those tokens. The last block may be
// partial.
func (p *Proxy) prefixHashes(msgs []trace.Message) []int64 {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	ids := p.tok.Encode(b.String())
	out := make([]int64, 0, (len(ids)+RedactBlockSize-1)/RedactBlockSize)
	h := fnv1a.Offset // chained over the blocks
	for i, id := range ids {
		for v := uint64(id); ; v >>= 8 {
			h = fnv1a.AddByte(h, byte(v))
			if v < 0x100 {
				break
			}
		}
		if (i+1)%RedactBlockSize == 0 || i == len(ids)-1 {
			out = append(out, int64(h&(1<<63-1)))
		}
	}
	return out
}

// outputTokens is the output length replay should ask for: the server's
// count, else the answer's events as the record counted them (Fill counted
// each event's text once: content, reasoning and tool calls; the sum
// reuses that, rather than counting the answer a second time), else the
// answer counted, else the request's max_tokens.
func outputTokens(rec *trace.Record, call *api.Call, answer string, count func(string) int) int32 {
	var events int32
	for _, n := range rec.EventTokens {
		events += n
	}
	switch {
	case rec.CompletionTokens > 0:
		return rec.CompletionTokens
	case events > 0:
		return events
	case answer != "":
		return int32(count(answer))
	case call.MaxTokens > 0:
		return call.MaxTokens
	}
	return 1
}

// dropSystem is msgs without its system and developer messages.
func dropSystem(msgs []trace.Message) []trace.Message {
	out := msgs[:0]
	for _, m := range msgs {
		if m.Role != "system" && m.Role != "developer" {
			out = append(out, m)
		}
	}
	return out
}
