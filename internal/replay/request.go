package replay

import (
	"math/rand/v2"

	"github.com/tracekit/tracekit/internal/api/chat"
	"github.com/tracekit/tracekit/internal/api/completions"
	"github.com/tracekit/tracekit/internal/fnv1a"

	"github.com/tracekit/tracekit/trace"
)

// Endpoint is the generation API a run drives.
type Endpoint string

// Endpoints replay can drive: trace.Endpoints.
const (
	EndpointChat        Endpoint = trace.EndpointChat        // /v1/chat/completions, messages
	EndpointCompletions Endpoint = trace.EndpointCompletions // /v1/completions, history concatenated into prompt
	EndpointResponses   Endpoint = trace.EndpointResponses   // /v1/responses, history as input items
	EndpointMessages    Endpoint = trace.EndpointMessages    // /v1/messages (Anthropic), content blocks
	EndpointEmbeddings  Endpoint = trace.EndpointEmbeddings  // /v1/embeddings, one input per message
	EndpointRerank      Endpoint = trace.EndpointRerank      // /v1/rerank, a query and documents
	EndpointScore       Endpoint = trace.EndpointScore       // /v1/score, text_1 and text_2
	// /v1/audio/transcriptions and translations: the turn's audio clip
	// uploaded as multipart/form-data, its text as the prompt field.
	EndpointTranscriptions Endpoint = trace.EndpointTranscriptions
	EndpointTranslations   Endpoint = trace.EndpointTranslations
)

// ResponsesState is how a Responses conversation carries its history.
type ResponsesState string

// The ways a Responses conversation carries its history.
const (
	ResponsesClient ResponsesState = "client" // every turn sends the whole history as input items
	ResponsesServer ResponsesState = "server" // previous_response_id and the new items only
)

// bodyOptions are the request fields that do not change within a run.
type bodyOptions struct {
	endpoint        Endpoint
	ignoreEOS       bool
	temperature     *float64
	continuousUsage bool
	reasoningEffort string // chat's reasoning_effort, "" unset
	// extra is the inside of the --extra-body object ("k":v,...), appended
	// last so its fields override tracekit's own (servers keep the last of
	// duplicate keys).
	extra []byte
}

// appendBody appends the JSON request body for model, the conversation so
// far (history, then this turn's messages) and maxTokens to dst, streamed
// with usage unless nonStreaming ("stream": false).
func (o *bodyOptions) appendBody(dst []byte, model string, history, msgs []trace.Message, maxTokens int32, nonStreaming bool) []byte {
	return o.appendRequest(dst, model, history, msgs, maxTokens, nonStreaming, "", "")
}

// appendRequest is appendBody with the turn's "tools" and "tool_choice"
// JSON texts (chat only; "" leaves a field out). They are copied as they
// are: trace.Turn.Check validated them when the trace was read.
func (o *bodyOptions) appendRequest(dst []byte, model string, history, msgs []trace.Message, maxTokens int32, nonStreaming bool, tools, toolChoice string) []byte {
	dst = o.appendHead(dst, model)
	first := true
	for _, part := range [][]trace.Message{history, msgs} {
		for i := range part {
			dst = o.appendMsg(dst, &part[i], first)
			first = false
		}
	}
	return o.appendTail(dst, maxTokens, nonStreaming, tools, toolChoice)
}

// appendHead appends what a body holds before its first message: the
// model and the opening of "messages" (chat) or "prompt" (completions).
func (o *bodyOptions) appendHead(dst []byte, model string) []byte {
	if o.endpoint == EndpointCompletions {
		return completions.AppendRequestHead(dst, model)
	}
	return chat.AppendRequestHead(dst, model)
}

// appendMsg appends message m as the body carries it: a chat message
// object after a "," (completions: its escaped text after a "\n\n"),
// without the separator when it is the first. Messages so encoded
// concatenate: the encoding of a list is the encodings of its messages
// one after the other.
func (o *bodyOptions) appendMsg(dst []byte, m *trace.Message, first bool) []byte {
	if o.endpoint == EndpointCompletions {
		return completions.AppendRequestMessage(dst, m, first)
	}
	return chat.AppendRequestMessage(dst, m, first)
}

// appendTail appends what a body holds after its last message: the end
// of the messages or prompt, tools and tool_choice (chat only; "" leaves
// a field out), then the run's fixed fields.
func (o *bodyOptions) appendTail(dst []byte, maxTokens int32, nonStreaming bool, tools, toolChoice string) []byte {
	ro := chat.RequestOptions{MaxTokens: maxTokens, NonStreaming: nonStreaming, ContinuousUsage: o.continuousUsage,
		IgnoreEOS: o.ignoreEOS, Temperature: o.temperature, ReasoningEffort: o.reasoningEffort, Extra: o.extra}
	if o.endpoint == EndpointCompletions {
		return completions.AppendRequestTail(dst, &ro)
	}
	return chat.AppendRequestTail(dst, tools, toolChoice, &ro)
}

// encMsgs is a message list encoded once, as a body carries it between
// its head and tail (appendMsg): a turn's body is the head, the encoded
// history and new messages, and the tail, whatever the history's length,
// without encoding an earlier message again.
type encMsgs struct {
	b []byte
	// ends[i] is where message i ends in b: the messages from i on are
	// b[ends[i-1]:], a segment that starts with its separator.
	ends []int32
}

// add encodes m after the messages e holds.
func (e *encMsgs) add(o *bodyOptions, m *trace.Message) {
	e.b = o.appendMsg(e.b, m, len(e.ends) == 0)
	e.ends = append(e.ends, int32(len(e.b)))
}

// from is the encoding of messages i and later, as they follow earlier
// messages (with its leading separator unless i is 0).
func (e *encMsgs) from(i int) []byte {
	if i == 0 {
		return e.b
	}
	return e.b[e.ends[i-1]:]
}

// clone is a copy of e with room for grow more bytes and more messages,
// for a transcript that extends a shared one.
func (e *encMsgs) clone(grow, growMsgs int) encMsgs {
	return encMsgs{b: append(make([]byte, 0, len(e.b)+grow), e.b...),
		ends: append(make([]int32, 0, len(e.ends)+growMsgs), e.ends...)}
}

// extend appends the messages of src from i on to e, copying their
// encoding (a separator added or dropped where e's messages and src's
// meet), never encoding them again.
func (e *encMsgs) extend(o *bodyOptions, src *encMsgs, i int) {
	if i >= len(src.ends) {
		return
	}
	seg, base := src.from(i), 0
	if i > 0 {
		base = int(src.ends[i-1])
	}
	switch sep := o.sep(); {
	case i == 0 && len(e.ends) > 0:
		e.b = append(e.b, sep...)
	case i > 0 && len(e.ends) == 0:
		seg, base = seg[len(sep):], base+len(sep)
	}
	shift := int32(len(e.b) - base)
	e.b = append(e.b, seg...)
	for _, x := range src.ends[i:] {
		e.ends = append(e.ends, x+shift)
	}
}

// sep is what appendMsg writes between two messages.
func (o *bodyOptions) sep() string {
	if o.endpoint == EndpointCompletions {
		return completions.RequestSep
	}
	return chat.RequestSep
}

// appendBodyEnc appends the body of a request whose history and messages
// are already encoded in msgs: head, msgs, tail. Its bytes are those of
// appendRequest with the same messages.
func (o *bodyOptions) appendBodyEnc(dst []byte, model string, msgs []byte, turn *trace.Turn) []byte {
	dst = o.appendHead(dst, model)
	dst = append(dst, msgs...)
	return o.appendTail(dst, turn.OutputTokens, turn.NonStreaming, turn.Tools, turn.ToolChoice)
}

// appendBodyMsgs is appendBodyEnc of the encoded history hist (n
// messages) followed by msgs, encoded into dst as they go.
func (o *bodyOptions) appendBodyMsgs(dst []byte, model string, hist []byte, n int, msgs []trace.Message, turn *trace.Turn) []byte {
	dst = o.appendHead(dst, model)
	dst = append(dst, hist...)
	for i := range msgs {
		dst = o.appendMsg(dst, &msgs[i], n == 0 && i == 0)
	}
	return o.appendTail(dst, turn.OutputTokens, turn.NonStreaming, turn.Tools, turn.ToolChoice)
}

// convBody is a chat conversation's request body kept from turn to turn
// in one buffer: its head, every message so far encoded once (add), and
// the tail of the turn due (build). Between turns the tail is cut and the
// new messages and answer appended in its place, so a turn's body costs
// its new messages and its tail, never its history again. The buffer is
// not in use by the time the next add runs: a closed-loop conversation
// has one request at a time.
type convBody struct {
	buf       []byte
	head, end int // the encoded messages are buf[head:end]
	n         int // messages encoded
	model     string
	started   bool
}

// add encodes m after the conversation's messages.
func (c *convBody) add(o *bodyOptions, model string, m *trace.Message) {
	if !c.started {
		c.buf, c.model, c.started = o.appendHead(c.buf[:0], model), model, true
		c.head, c.end = len(c.buf), len(c.buf)
	}
	c.buf = o.appendMsg(c.buf[:c.end], m, c.n == 0)
	c.end, c.n = len(c.buf), c.n+1
}

// build returns the body of turn with model: the head (rewritten when the
// model differs from the head's), the messages so far, turn's tail. The
// slice is c's buffer: valid until the next add or build.
func (c *convBody) build(o *bodyOptions, model string, turn *trace.Turn) []byte {
	if !c.started {
		c.buf, c.model, c.started = o.appendHead(c.buf[:0], model), model, true
		c.head, c.end = len(c.buf), len(c.buf)
	}
	if model != c.model {
		b := o.appendHead(make([]byte, 0, cap(c.buf)+len(model)), model)
		h := len(b)
		b = append(b, c.buf[c.head:c.end]...)
		c.buf, c.head, c.end, c.model = b, h, len(b), model
	}
	c.buf = o.appendTail(c.buf[:c.end], turn.OutputTokens, turn.NonStreaming, turn.Tools, turn.ToolChoice)
	return c.buf
}

// fillerWords are common English words that o200k_base and cl100k_base
// each encode as a single token when preceded by a space, so n of them make
// a text of n tokens.
var fillerWords = []string{
	" the", " of", " and", " to", " in", " is", " that", " for", " it", " as",
	" was", " with", " be", " by", " on", " not", " he", " this", " are", " or",
	" his", " from", " at", " which", " but", " have", " an", " had", " they", " you",
}

// fillerText synthesizes a text of about n tokens for a message whose
// content the trace redacted. Each conversation gets its own word sequence
// (seeded by seed and the conversation) so unrelated conversations do not
// share a cacheable prefix.
func fillerText(n int32, seed uint64, conv string) string {
	if n <= 0 {
		return ""
	}
	rng := rand.New(rand.NewPCG(seed, fnv1a.String(conv)))
	b := make([]byte, 0, int(n)*5)
	for range n {
		b = append(b, fillerWords[rng.IntN(len(fillerWords))]...)
	}
	return string(b[1:]) // the first word without its leading space
}
