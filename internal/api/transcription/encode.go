package transcription

import (
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Shape is a server's way of streaming a transcript.
type Shape string

// The stream shapes (see the package doc).
const (
	ShapeVLLM   Shape = "vllm"
	ShapeOpenAI Shape = "openai"
)

// ParseShape reads a shape's name.
func ParseShape(s string) (Shape, bool) {
	switch Shape(s) {
	case ShapeVLLM, ShapeOpenAI:
		return Shape(s), true
	}
	return "", false
}

// Encoder writes transcripts in one Shape: the mock's side. vLLM's
// chunks are transcription.chunk objects (translation.chunk for
// translations), a usage-only chunk when the request asked for usage
// (Head.IncludeUsage), cumulative usage on each chunk with
// continuous_usage_stats; its non-streaming body reports the audio's
// duration in seconds (SetSeconds). OpenAI's stream is delta events and a
// done event with the whole text and token usage, which is the terminal
// event; its body reports tokens. A transcript has no reasoning and no
// tool calls: those methods append nothing.
type Encoder struct {
	shape     Shape
	translate bool
	seconds   int64
	h         api.Head
	head      []byte // vLLM: the constant start of every chunk
	tok       int64
	text      []byte // OpenAI: the transcript so far, for the done event
	u         api.Usage
}

// NewEncoder returns an encoder of shape (ShapeVLLM when empty); translate
// names vLLM's chunks translation.chunk.
func NewEncoder(shape Shape, translate bool) *Encoder {
	if shape == "" {
		shape = ShapeVLLM
	}
	return &Encoder{shape: shape, translate: translate}
}

// SetShape sets the shape of the responses the encoder writes next.
// Empty is ShapeVLLM.
func (e *Encoder) SetShape(s Shape) {
	if s == "" {
		s = ShapeVLLM
	}
	e.shape = s
}

// SetSeconds sets the audio duration a vLLM body reports (whole seconds,
// rounded up, as vLLM's usage does).
func (e *Encoder) SetSeconds(s int64) { e.seconds = s }

// Begin starts a response; neither shape has an opening event.
func (e *Encoder) Begin(dst []byte, h *api.Head) []byte {
	e.h, e.tok, e.text, e.u = *h, 0, e.text[:0], api.NoUsage
	if e.shape == ShapeVLLM {
		obj := "transcription.chunk"
		if e.translate {
			obj = "translation.chunk"
		}
		b := append(e.head[:0], `data: {"id":"trsc-`...)
		b = append(js.AppendEscaped(b, h.ID), `","object":"`...)
		b = append(b, obj...)
		b = append(b, `","created":`...)
		b = strconv.AppendInt(b, h.Created, 10)
		b = append(b, `,"model":`...)
		e.head = js.AppendQuoted(b, h.Model)
	}
	return dst
}

// Reasoning appends nothing: a transcript has none.
func (e *Encoder) Reasoning(dst []byte, _ []byte, _ int) []byte { return dst }

// Text appends a piece of the transcript.
func (e *Encoder) Text(dst []byte, text []byte, tokens int) []byte {
	e.tok += int64(tokens)
	if e.shape == ShapeOpenAI {
		e.text = append(e.text, text...)
		dst = append(dst, `data: {"type":"transcript.text.delta","delta":`...)
		dst = js.AppendQuoted(dst, text)
		return append(dst, "}\n\n"...)
	}
	dst = append(dst, e.head...)
	dst = append(dst, `,"choices":[{"delta":{"content":`...)
	dst = js.AppendQuoted(dst, text)
	dst = append(dst, `},"finish_reason":`...)
	if tokens > 0 && e.h.Completion > 0 && e.tok >= e.h.Completion && e.tok-int64(tokens) < e.h.Completion {
		dst = append(append(append(dst, '"'), e.h.Finish...), '"')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"stop_reason":null}]`...)
	if e.h.ContinuousUsage {
		dst = appendTokens(append(dst, `,"usage":`...), api.Usage{Prompt: e.h.Prompt, Completion: e.tok}, false)
	}
	return append(dst, "}\n\n"...)
}

// ToolCall and ToolArgs append nothing: a transcript calls no tools.
func (e *Encoder) ToolCall(dst []byte, _, _ string, _ []byte, _ int) []byte { return dst }

// ToolArgs appends nothing.
func (e *Encoder) ToolArgs(dst []byte, _ []byte, _ int) []byte { return dst }

// End appends vLLM's usage-only chunk when usage was asked for; OpenAI's
// usage goes out with its done event (Done).
func (e *Encoder) End(dst []byte, u api.Usage) []byte {
	e.u = u
	if e.shape == ShapeOpenAI || !(e.h.IncludeUsage || e.h.ContinuousUsage) {
		return dst
	}
	dst = append(dst, e.head...)
	dst = appendTokens(append(dst, `,"choices":[],"usage":`...), u, false)
	return append(dst, "}\n\n"...)
}

// Done appends the terminal event: data: [DONE], or OpenAI's
// transcript.text.done with the text and usage.
func (e *Encoder) Done(dst []byte) []byte {
	if e.shape == ShapeVLLM {
		return append(dst, "data: [DONE]\n\n"...)
	}
	dst = append(dst, `data: {"type":"transcript.text.done","text":`...)
	dst = js.AppendQuoted(dst, e.text)
	dst = appendTokens(append(dst, `,"usage":`...), e.u, true)
	return append(dst, "}\n\n"...)
}

// Error appends an in-stream error event.
func (e *Encoder) Error(dst []byte, typ, msg string) []byte {
	dst = append(dst, `data: {`...)
	if e.shape == ShapeOpenAI {
		dst = append(dst, `"type":"error",`...)
	}
	dst = append(dst, `"error":{"type":`...)
	dst = js.AppendQuoted(dst, typ)
	dst = append(dst, `,"message":`...)
	dst = js.AppendQuoted(dst, msg)
	return append(dst, "}}\n\n"...)
}

// Body appends a whole non-streaming response: {"text","usage"}, the
// usage in seconds (vLLM) or tokens (OpenAI).
func (e *Encoder) Body(dst []byte, _ *api.Head, a *api.Answer) []byte {
	dst = append(dst, `{"text":`...)
	dst = js.AppendQuoted(dst, a.Text)
	dst = append(dst, `,"usage":`...)
	if e.shape == ShapeOpenAI {
		dst = appendTokens(dst, a.Usage, true)
	} else {
		dst = append(dst, `{"type":"duration","seconds":`...)
		dst = strconv.AppendInt(dst, e.seconds, 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendTokens appends a token usage: OpenAI's (type tokens, input_ and
// output_tokens) or vLLM's chat-shaped one.
func appendTokens(dst []byte, u api.Usage, openai bool) []byte {
	p, c := max(u.Prompt, 0), max(u.Completion, 0)
	if openai {
		dst = append(dst, `{"type":"tokens","input_tokens":`...)
		dst = strconv.AppendInt(dst, p, 10)
		dst = append(dst, `,"output_tokens":`...)
	} else {
		dst = append(dst, `{"prompt_tokens":`...)
		dst = strconv.AppendInt(dst, p, 10)
		dst = append(dst, `,"completion_tokens":`...)
	}
	dst = strconv.AppendInt(dst, c, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, p+c, 10)
	return append(dst, '}')
}
