package messages

import (
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Encoder writes Messages API streams and bodies as Anthropic documents
// them: message_start (input-side usage) and a ping; per content block
// content_block_start, its deltas and content_block_stop (a thinking block
// gets a signature_delta before its stop); message_delta with the
// stop_reason and the cumulative usage; message_stop.
type Encoder struct {
	h   api.Head
	cur blockKind
	idx int // index of the open block, or of the next one when none is open
}

type blockKind byte

const (
	none blockKind = iota
	text
	thinking
	toolUse
)

// NewEncoder returns a Messages encoder.
func NewEncoder() *Encoder { return &Encoder{} }

func event(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	return append(dst, '"')
}

func end(dst []byte) []byte { return append(dst, "}\n\n"...) }

// stopReason is Anthropic's word for a finish.
func stopReason(f api.Finish) string {
	switch f {
	case api.FinishLength:
		return "max_tokens"
	case api.FinishToolCalls:
		return "tool_use"
	}
	return "end_turn"
}

// Begin appends message_start, whose usage is the input side (input_tokens
// without the cached ones, as Anthropic counts), and a ping.
func (e *Encoder) Begin(dst []byte, h *api.Head) []byte {
	e.h, e.cur, e.idx = *h, none, 0
	dst = event(dst, "message_start")
	dst = append(dst, `,"message":{"id":"msg_`...)
	dst = append(js.AppendEscaped(dst, h.ID), `","type":"message","role":"assistant","content":[],"model":`...)
	dst = js.AppendQuoted(dst, h.Model)
	dst = append(dst, `,"stop_reason":null,"stop_sequence":null,"usage":`...)
	dst = appendUsage(dst, api.Usage{Prompt: h.Prompt, Completion: 0, Cached: h.Cached, Reasoning: -1}, true)
	dst = end(append(dst, '}'))
	return end(event(dst, "ping"))
}

// open closes the open block unless it is of kind k (and force is false)
// and starts a block of kind k.
func (e *Encoder) open(dst []byte, k blockKind, force bool, id, name string) []byte {
	if e.cur == k && !force {
		return dst
	}
	dst = e.close(dst)
	e.cur = k
	dst = strconv.AppendInt(append(event(dst, "content_block_start"), `,"index":`...), int64(e.idx), 10)
	switch k {
	case text:
		dst = append(dst, `,"content_block":{"type":"text","text":""}`...)
	case thinking:
		dst = append(dst, `,"content_block":{"type":"thinking","thinking":"","signature":""}`...)
	case toolUse:
		dst = js.AppendQuoted(append(dst, `,"content_block":{"type":"tool_use","id":`...), id)
		dst = append(js.AppendQuoted(append(dst, `,"name":`...), name), `,"input":{}}`...)
	}
	return end(dst)
}

// delta appends a content_block_delta of the open block: its delta type,
// the text's key, the text.
func (e *Encoder) delta(dst []byte, typ, key string, s []byte) []byte {
	dst = strconv.AppendInt(append(event(dst, "content_block_delta"), `,"index":`...), int64(e.idx), 10)
	dst = append(append(append(dst, `,"delta":{"type":"`...), typ...), `","`...)
	dst = append(append(dst, key...), `":`...)
	return end(append(js.AppendQuoted(dst, s), '}'))
}

// close ends the open block.
func (e *Encoder) close(dst []byte) []byte {
	if e.cur == none {
		return dst
	}
	if e.cur == thinking {
		dst = strconv.AppendInt(append(event(dst, "content_block_delta"), `,"index":`...), int64(e.idx), 10)
		dst = append(dst, `,"delta":{"type":"signature_delta","signature":"`...)
		dst = append(js.AppendEscaped(append(dst, "sig-"...), e.h.ID), `"}`...)
		dst = end(dst)
	}
	dst = end(strconv.AppendInt(append(event(dst, "content_block_stop"), `,"index":`...), int64(e.idx), 10))
	e.cur, e.idx = none, e.idx+1
	return dst
}

// Text appends a text_delta, starting a text block first.
func (e *Encoder) Text(dst []byte, s []byte, tokens int) []byte {
	return e.delta(e.open(dst, text, false, "", ""), "text_delta", "text", s)
}

// Reasoning appends a thinking_delta, starting a thinking block first.
func (e *Encoder) Reasoning(dst []byte, s []byte, tokens int) []byte {
	return e.delta(e.open(dst, thinking, false, "", ""), "thinking_delta", "thinking", s)
}

// ToolCall starts a tool_use block and appends its first input_json_delta,
// if any.
func (e *Encoder) ToolCall(dst []byte, id, name string, args []byte, tokens int) []byte {
	dst = e.open(dst, toolUse, true, id, name)
	if len(args) == 0 {
		return dst
	}
	return e.delta(dst, "input_json_delta", "partial_json", args)
}

// ToolArgs appends an input_json_delta to the open tool_use block.
func (e *Encoder) ToolArgs(dst []byte, args []byte, tokens int) []byte {
	if e.cur != toolUse {
		return dst
	}
	return e.delta(dst, "input_json_delta", "partial_json", args)
}

// End closes the open block and appends message_delta with the stop
// reason and the usage, cumulative.
func (e *Encoder) End(dst []byte, u api.Usage) []byte {
	dst = e.close(dst)
	dst = append(event(dst, "message_delta"), `,"delta":{"stop_reason":"`...)
	dst = append(append(dst, stopReason(e.h.Finish)...), `","stop_sequence":null},"usage":`...)
	return end(appendUsage(dst, u, false))
}

// Done appends message_stop.
func (e *Encoder) Done(dst []byte) []byte { return end(event(dst, "message_stop")) }

// Error appends an error event: {"type":"error","error":{"type","message"}}.
func (e *Encoder) Error(dst []byte, typ, msg string) []byte {
	dst = js.AppendQuoted(append(event(dst, "error"), `,"error":{"type":`...), typ)
	dst = js.AppendQuoted(append(dst, `,"message":`...), msg)
	return end(append(dst, '}'))
}

// Body appends a whole message for a.
func (e *Encoder) Body(dst []byte, h *api.Head, a *api.Answer) []byte {
	dst = append(dst, `{"id":"msg_`...)
	dst = append(js.AppendEscaped(dst, h.ID), `","type":"message","role":"assistant","model":`...)
	dst = append(js.AppendQuoted(dst, h.Model), `,"content":[`...)
	n := 0
	sep := func(dst []byte) []byte {
		if n++; n > 1 {
			dst = append(dst, ',')
		}
		return dst
	}
	if a.Reasoning != "" {
		dst = js.AppendQuoted(append(sep(dst), `{"type":"thinking","thinking":`...), a.Reasoning)
		dst = append(js.AppendEscaped(append(dst, `,"signature":"sig-`...), h.ID), `"}`...)
	}
	if a.Text != "" || len(a.ToolCalls) == 0 {
		dst = append(js.AppendQuoted(append(sep(dst), `{"type":"text","text":`...), a.Text), '}')
	}
	for _, tc := range a.ToolCalls {
		dst = js.AppendQuoted(append(sep(dst), `{"type":"tool_use","id":`...), tc.ID)
		dst = js.AppendQuoted(append(dst, `,"name":`...), tc.Name)
		dst = append(dst, `,"input":`...)
		if js.Object([]byte(tc.Arguments)) {
			dst = append(dst, tc.Arguments...)
		} else {
			dst = append(dst, "{}"...)
		}
		dst = append(dst, '}')
	}
	dst = append(append(append(dst, `],"stop_reason":"`...), stopReason(a.Finish)...), `","stop_sequence":null,"usage":`...)
	return append(appendUsage(dst, a.Usage, true), '}')
}

// appendUsage appends Anthropic's usage object: input_tokens without the
// cached prompt tokens, which are cache_read_input_tokens. The input side
// is written when reported (always, with zeros, when all is set, as
// message_start and a body have it).
func appendUsage(dst []byte, u api.Usage, all bool) []byte {
	dst = append(dst, '{')
	if u.Prompt >= 0 || all {
		cached := max(u.Cached, 0)
		dst = strconv.AppendInt(append(dst, `"input_tokens":`...), max(u.Prompt-cached, 0), 10)
		dst = append(dst, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
		dst = append(strconv.AppendInt(dst, cached, 10), ',')
	}
	dst = strconv.AppendInt(append(dst, `"output_tokens":`...), max(u.Completion, 0), 10)
	if u.Reasoning >= 0 {
		dst = append(strconv.AppendInt(append(dst, `,"output_tokens_details":{"thinking_tokens":`...), u.Reasoning, 10), '}')
	}
	return append(dst, '}')
}
