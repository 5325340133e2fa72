package mock

import (
	"time"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/transcription"
	"github.com/tracekit/tracekit/trace"
)

// The encoding of responses: the generated text of each event, handed to
// the API's encoder (internal/api), which appends the event's bytes to
// the stream's reused buffer (no allocation per event once it has grown).

// reasoningSalt separates the words of the reasoning from the answer's,
// so an answer reads the same whether reasoning came before it or not.
const reasoningSalt = 0x7265_6173_6f6e_696e // "reasonin"

// appendWords appends the generated text of output tokens [from, to): a
// space and a word per token, reasoning words for the first x.reasoning
// tokens, answer words after (answer token j is word j of the answer);
// the end-of-text token of a "stop" finish has none.
func (x *exchange) appendWords(b []byte, from, to int) []byte {
	n, r := int(x.e.CompletionTokens), x.reasoning
	if x.e.FinishReason == "stop" {
		n--
	}
	for i := from; i < min(to, n); i++ {
		b = append(b, ' ')
		if i < r {
			b = append(b, word(x.s.cfg.Seed, x.p.hash^reasoningSalt, i)...)
		} else {
			b = append(b, word(x.s.cfg.Seed, x.p.hash, i-r)...)
		}
	}
	return b
}

// buildHead tells the encoder what it needs of the response before its
// first event.
func (x *exchange) buildHead() {
	x.head = api.Head{ID: x.e.RequestID, Model: x.e.Model, Created: time.Now().Unix(),
		Prompt: int64(x.p.tokens), Cached: int64(x.e.CachedTokens), Completion: int64(x.e.CompletionTokens),
		Finish: api.Finish(x.e.FinishReason), IncludeUsage: x.req.IncludeUsage, ContinuousUsage: x.req.ContinuousUsage}
	x.buf = make([]byte, 0, 512)
}

// usage is the response's usage: reasoning tokens are reported when the
// answer has some, media tokens by kind when the request had media.
func (x *exchange) usage() api.Usage {
	u := api.Usage{Prompt: int64(x.p.tokens), Completion: int64(x.e.CompletionTokens), Cached: int64(x.e.CachedTokens), Reasoning: -1,
		Media: x.media}
	if x.reasoning > 0 {
		u.Reasoning = int64(x.reasoning)
	}
	return u
}

// begin appends the encoder's opening events once: chat's role chunk
// (an event of its own), the other APIs' with their first event.
func (x *exchange) begin(b []byte) []byte {
	if x.begun {
		return b
	}
	x.begun = true
	return x.enc.Begin(b, &x.head)
}

// appendEvent encodes the prepared event: chat's role chunk, or the
// tokens [x.tok, x.tok+x.take) as reasoning, text or a tool call's piece.
func (x *exchange) appendEvent(b []byte) []byte {
	b = x.begin(b)
	if x.role {
		return b
	}
	from, to := x.tok, x.tok+x.take
	switch {
	case from < x.reasoning:
		x.text = x.appendWords(x.text[:0], from, to)
		return x.enc.Reasoning(b, x.text, x.take)
	case len(x.toolNames) > 0:
		k := x.callAt(from)
		cf, _ := x.toolSpan(k)
		x.text = x.appendToolArgs(x.text[:0], k, from, to)
		if from == cf {
			return x.enc.ToolCall(b, x.toolID(k), x.toolNames[k], x.text, x.take)
		}
		return x.enc.ToolArgs(b, x.text, x.take)
	}
	x.text = x.appendWords(x.text[:0], from, to)
	return x.enc.Text(b, x.text, x.take)
}

// appendTail appends what follows the last event: the events that carry
// the usage and the finish, then the terminal one unless the nodone
// fault leaves it out.
func (x *exchange) appendTail(b []byte) []byte {
	b = x.enc.End(x.begin(b), x.usage())
	if !x.eff.noDone {
		b = x.enc.Done(b)
	}
	return b
}

// appendError appends the error fault's in-stream error in the API's
// shape: vLLM ends an errored chat or completions stream with
// data: [DONE]; a Responses or Messages stream ends at its error event.
func (x *exchange) appendError(b []byte) []byte {
	msg := "injected fault " + x.fault.String()
	switch x.api {
	case api.Responses:
		return x.enc.Error(x.begin(b), "server_error", msg)
	case api.Messages:
		return x.enc.Error(x.begin(b), "overloaded_error", msg)
	}
	if x.speech() && x.s.cfg.TranscriptionStream == string(transcription.ShapeOpenAI) {
		return x.enc.Error(x.begin(b), "server_error", msg) // OpenAI's stream ends at its error event
	}
	return x.enc.Done(x.enc.Error(b, "InternalServerError", msg))
}

// malformedEvent is the malformed fault's event in the API's framing: an
// event whose JSON never ends.
func malformedEvent(name api.Name) []byte {
	switch name {
	case api.Responses:
		return []byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"unterminated\n\n")
	case api.Messages:
		return []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"unterminated\n\n")
	case api.Completions:
		return []byte("data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"unterminated\n\n")
	}
	return []byte("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"unterminated\n\n")
}

// answer is the whole answer of a non-streamed response.
func (x *exchange) answer() *api.Answer {
	n := int(x.e.CompletionTokens)
	a := &api.Answer{Usage: x.usage(), Finish: api.Finish(x.e.FinishReason)}
	a.Reasoning = string(x.appendWords(nil, 0, x.reasoning))
	if len(x.toolNames) == 0 {
		a.Text = string(x.appendWords(nil, x.reasoning, n))
	}
	for k, name := range x.toolNames {
		cf, ct := x.toolSpan(k)
		a.ToolCalls = append(a.ToolCalls, trace.ToolCall{ID: x.toolID(k), Name: name, Arguments: string(x.appendToolArgs(nil, k, cf, ct))})
	}
	return a
}
