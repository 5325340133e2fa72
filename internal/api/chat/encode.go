package chat

import (
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Encoder writes chat completion chunks as vLLM streams them: a role-only
// first chunk, one chunk per piece of text, reasoning ("reasoning") or
// tool-call fragment, finish_reason on the chunk that reaches the planned
// output, with stream_options: "usage":null on every chunk
// (include_usage) or cumulative usage on each (continuous_usage_stats),
// then a usage-only chunk and data: [DONE]. In completions mode
// (NewCompletionsEncoder) the chunks are text_completion objects with
// choices[].text, and reasoning and tool calls have no place.
type Encoder struct {
	completions bool
	h           api.Head
	head        []byte // the constant start of every chunk, up to the choice's index
	usageHead   []byte // the start of the usage-only chunk
	tok         int64  // output tokens sent so far
	tool        int    // index of the tool call last started, -1 before any
	finished    bool   // a chunk carried the finish_reason
	scratch     []byte
}

// NewEncoder returns a chat chunk encoder.
func NewEncoder() *Encoder { return &Encoder{} }

// NewCompletionsEncoder returns an encoder of completion chunks.
func NewCompletionsEncoder() *Encoder { return &Encoder{completions: true} }

// Begin builds the chunks' constant head and appends the role chunk
// (chat only).
func (e *Encoder) Begin(dst []byte, h *api.Head) []byte {
	e.h, e.tok, e.tool, e.finished = *h, 0, -1, false
	id, object := "chatcmpl-", "chat.completion.chunk"
	if e.completions {
		id, object = "cmpl-", "text_completion"
	}
	b := append(e.head[:0], `data: {"id":"`...)
	b = append(js.AppendEscaped(append(b, id...), h.ID), `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, h.Created, 10)
	b = append(b, `,"model":`...)
	b = js.AppendQuoted(b, h.Model)
	e.usageHead = append(append(e.usageHead[:0], b...), `,"choices":[],"usage":`...)
	e.head = append(b, `,"choices":[{"index":0,`...)
	if e.completions {
		return dst
	}
	dst = append(dst, e.head...)
	dst = append(dst, `"delta":{"role":"assistant","content":""}`...)
	return e.tail(dst, 0)
}

// tail closes a chunk that carried tokens output tokens: finish_reason,
// usage per stream_options, the event's end.
func (e *Encoder) tail(dst []byte, tokens int) []byte {
	e.tok += int64(tokens)
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if tokens > 0 && !e.finished && e.h.Completion > 0 && e.tok >= e.h.Completion {
		e.finished = true
		dst = append(append(append(dst, '"'), e.h.Finish...), '"')
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"stop_reason":null}]`...)
	switch {
	case e.h.ContinuousUsage:
		u := api.Usage{Prompt: e.h.Prompt, Completion: e.tok, Cached: e.h.Cached, Reasoning: -1}
		dst = appendUsage(append(dst, `,"usage":`...), u)
	case e.h.IncludeUsage:
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

// Text appends a chunk of answer text.
func (e *Encoder) Text(dst []byte, text []byte, tokens int) []byte {
	dst = append(dst, e.head...)
	if e.completions {
		dst = js.AppendQuoted(append(dst, `"text":`...), text)
	} else {
		dst = append(js.AppendQuoted(append(dst, `"delta":{"content":`...), text), '}')
	}
	return e.tail(dst, tokens)
}

// Reasoning appends a chunk of reasoning text; completions have none.
func (e *Encoder) Reasoning(dst []byte, text []byte, tokens int) []byte {
	if e.completions {
		e.tok += int64(tokens)
		return dst
	}
	dst = append(dst, e.head...)
	dst = append(js.AppendQuoted(append(dst, `"delta":{"reasoning":`...), text), '}')
	return e.tail(dst, tokens)
}

// ToolCall appends the first fragment of the next tool call: its id,
// type and name with the first piece of its arguments.
func (e *Encoder) ToolCall(dst []byte, id, name string, args []byte, tokens int) []byte {
	if e.completions {
		e.tok += int64(tokens)
		return dst
	}
	e.tool++
	dst = append(dst, e.head...)
	dst = js.AppendQuoted(append(dst, `"delta":{"tool_calls":[{"id":`...), id)
	dst = append(dst, `,"type":"function","index":`...)
	dst = strconv.AppendInt(dst, int64(e.tool), 10)
	dst = js.AppendQuoted(append(dst, `,"function":{"name":`...), name)
	dst = append(js.AppendQuoted(append(dst, `,"arguments":`...), args), "}}]}"...)
	return e.tail(dst, tokens)
}

// ToolArgs appends the next argument fragment of the call last started.
func (e *Encoder) ToolArgs(dst []byte, args []byte, tokens int) []byte {
	if e.completions || e.tool < 0 {
		e.tok += int64(tokens)
		return dst
	}
	dst = append(dst, e.head...)
	dst = append(dst, `"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(e.tool), 10)
	dst = append(js.AppendQuoted(append(dst, `,"function":{"arguments":`...), args), "}}]}"...)
	return e.tail(dst, tokens)
}

// End appends a finish chunk if no chunk carried the finish_reason, then
// the usage-only chunk when stream_options asked for usage.
func (e *Encoder) End(dst []byte, u api.Usage) []byte {
	if !e.finished {
		dst = append(dst, e.head...)
		if e.completions {
			dst = append(dst, `"text":""`...)
		} else {
			dst = append(dst, `"delta":{"content":""}`...)
		}
		dst = append(dst, `,"logprobs":null,"finish_reason":"`...)
		dst = append(append(dst, e.h.Finish...), `","stop_reason":null}]`...)
		if e.h.IncludeUsage {
			dst = append(dst, `,"usage":null`...)
		}
		dst = append(dst, "}\n\n"...)
		e.finished = true
	}
	if e.h.IncludeUsage || e.h.ContinuousUsage {
		dst = append(appendUsage(append(dst, e.usageHead...), u), "}\n\n"...)
	}
	return dst
}

// Done appends data: [DONE].
func (e *Encoder) Done(dst []byte) []byte { return append(dst, "data: [DONE]\n\n"...) }

// Error appends vLLM's in-stream error chunk.
func (e *Encoder) Error(dst []byte, typ, msg string) []byte {
	dst = js.AppendQuoted(append(dst, `data: {"error":{"object":"error","message":`...), msg)
	dst = js.AppendQuoted(append(dst, `,"type":`...), typ)
	return append(dst, `,"param":null,"code":500}}`+"\n\n"...)
}

// Body appends a whole chat.completion (or text_completion) body.
func (e *Encoder) Body(dst []byte, h *api.Head, a *api.Answer) []byte {
	id, object := "chatcmpl-", "chat.completion"
	if e.completions {
		id, object = "cmpl-", "text_completion"
	}
	dst = append(dst, `{"id":"`...)
	dst = append(js.AppendEscaped(append(dst, id...), h.ID), `","object":"`...)
	dst = append(append(dst, object...), `","created":`...)
	dst = strconv.AppendInt(dst, h.Created, 10)
	dst = js.AppendQuoted(append(dst, `,"model":`...), h.Model)
	dst = append(dst, `,"choices":[{"index":0,`...)
	if e.completions {
		dst = js.AppendQuoted(append(dst, `"text":`...), a.Text)
	} else {
		dst = append(dst, `"message":{"role":"assistant","content":`...)
		if len(a.ToolCalls) > 0 && a.Text == "" {
			dst = append(dst, "null"...)
		} else {
			dst = js.AppendQuoted(dst, a.Text)
		}
		if a.Reasoning != "" {
			dst = js.AppendQuoted(append(dst, `,"reasoning":`...), a.Reasoning)
		}
		dst = append(dst, `,"tool_calls":[`...)
		for k, tc := range a.ToolCalls {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = js.AppendQuoted(append(dst, `{"id":`...), tc.ID)
			dst = js.AppendQuoted(append(dst, `,"type":"function","function":{"name":`...), tc.Name)
			dst = append(js.AppendQuoted(append(dst, `,"arguments":`...), tc.Arguments), "}}"...)
		}
		dst = append(dst, "]}"...)
	}
	dst = append(dst, `,"logprobs":null,"finish_reason":"`...)
	dst = append(append(dst, a.Finish...), `","stop_reason":null}],"usage":`...)
	return append(appendUsage(dst, a.Usage), '}')
}

// appendUsage appends chat's usage object; fields not reported are left
// out (prompt and completion as 0).
func appendUsage(dst []byte, u api.Usage) []byte {
	p, c := max(u.Prompt, 0), max(u.Completion, 0)
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, p, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, p+c, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, c, 10)
	if u.Cached >= 0 {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, u.Cached, 10)
		if u.Media.Any() { // vLLM's split, left out without media as vLLM does
			dst = append(dst, `,"multimodal_tokens":{`...)
			sep := ""
			for _, k := range [...]struct {
				name string
				n    int64
			}{{"image", u.Media.Image}, {"video", u.Media.Video}, {"audio", u.Media.Audio}} {
				if k.n > 0 {
					dst = strconv.AppendInt(append(append(append(dst, sep...), '"'), k.name+`":`...), k.n, 10)
					sep = ","
				}
			}
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	if u.Reasoning >= 0 {
		dst = append(dst, `,"completion_tokens_details":{"reasoning_tokens":`...)
		dst = append(strconv.AppendInt(dst, u.Reasoning, 10), '}')
	}
	return append(dst, '}')
}
