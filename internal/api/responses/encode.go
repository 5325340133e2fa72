package responses

import (
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Encoder writes Responses API streams and bodies as vLLM does: each event
// "event: <type>" and "data: <json>" with "type" and "sequence_number"
// first; response.created and response.in_progress; per output item
// output_item.added (and content_part.added for text), its deltas, its
// ".done" events (full text) and output_item.done; reasoning as
// reasoning_text (vLLM's reasoning parsers' form, not OpenAI's
// summaries); response.completed (response.incomplete with reason
// max_output_tokens for a length finish) carrying the whole output and
// the usage.
type Encoder struct {
	h     api.Head
	seq   int64
	items []item
	cur   int    // the open item, -1 when none
	arena []byte // every item's text (or arguments), item after item
	u     api.Usage
	fin   api.Finish
}

type kind byte

const (
	message kind = iota
	reasoning
	functionCall
)

// item is one output item; its text is arena[start:end].
type item struct {
	kind       kind
	start, end int
	callID     string
	name       string
}

// NewEncoder returns a Responses encoder.
func NewEncoder() *Encoder { return &Encoder{} }

// event appends the start of an event of type typ, up to the comma after
// its sequence number.
func (e *Encoder) event(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, `","sequence_number":`...)
	dst = strconv.AppendInt(dst, e.seq, 10)
	e.seq++
	return append(dst, ',')
}

func end(dst []byte) []byte { return append(dst, "}\n\n"...) }

// appendID appends an item's id: its kind's prefix, the response id, its
// index.
func (e *Encoder) appendID(dst []byte, k int) []byte {
	prefix := "msg_"
	switch e.items[k].kind {
	case reasoning:
		prefix = "rs_"
	case functionCall:
		prefix = "fc_"
	}
	dst = append(dst, '"')
	dst = js.AppendEscaped(append(dst, prefix...), e.h.ID)
	dst = strconv.AppendInt(append(dst, '_'), int64(k), 10)
	return append(dst, '"')
}

// appendResponse appends the response object with status and the output
// so far.
func (e *Encoder) appendResponse(dst []byte, status string, withOutput bool, u *api.Usage) []byte {
	dst = append(dst, `{"id":"resp_`...)
	dst = append(js.AppendEscaped(dst, e.h.ID), `","object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, e.h.Created, 10)
	dst = append(append(append(dst, `,"status":"`...), status...), `","model":`...)
	dst = js.AppendQuoted(dst, e.h.Model)
	dst = append(dst, `,"output":[`...)
	if withOutput {
		for k := range e.items {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = e.appendItem(dst, k, "completed")
		}
	}
	dst = append(dst, ']')
	if status == "incomplete" {
		dst = append(dst, `,"incomplete_details":{"reason":"max_output_tokens"}`...)
	}
	dst = append(dst, `,"usage":`...)
	if u == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendUsage(dst, *u)
	}
	return append(dst, '}')
}

// appendItem appends output item k as it is when status ("in_progress":
// empty; "completed": whole).
func (e *Encoder) appendItem(dst []byte, k int, status string) []byte {
	it := &e.items[k]
	text := e.arena[it.start:it.end]
	if status != "completed" {
		text = text[:0]
	}
	dst = e.appendID(append(dst, `{"id":`...), k)
	switch it.kind {
	case message:
		dst = append(dst, `,"type":"message","role":"assistant","status":"`...)
		dst = append(append(dst, status...), `","content":[`...)
		if status == "completed" {
			dst = append(js.AppendQuoted(append(dst, `{"type":"output_text","annotations":[],"text":`...), text), '}')
		}
		dst = append(dst, ']')
	case reasoning:
		dst = append(dst, `,"type":"reasoning","summary":[],"status":"`...)
		dst = append(append(dst, status...), `","content":[`...)
		if status == "completed" {
			dst = append(js.AppendQuoted(append(dst, `{"type":"reasoning_text","text":`...), text), '}')
		}
		dst = append(dst, ']')
	case functionCall:
		dst = js.AppendQuoted(append(dst, `,"type":"function_call","call_id":`...), it.callID)
		dst = js.AppendQuoted(append(dst, `,"name":`...), it.name)
		dst = js.AppendQuoted(append(dst, `,"arguments":`...), text)
		dst = append(append(append(dst, `,"status":"`...), status...), '"')
	}
	return append(dst, '}')
}

// Begin appends response.created and response.in_progress.
func (e *Encoder) Begin(dst []byte, h *api.Head) []byte {
	e.h, e.seq, e.items, e.cur, e.arena, e.fin = *h, 0, e.items[:0], -1, e.arena[:0], h.Finish
	e.u = api.NoUsage
	for _, typ := range []string{"response.created", "response.in_progress"} {
		dst = e.event(dst, typ)
		dst = end(e.appendResponse(append(dst, `"response":`...), "in_progress", false, nil))
	}
	return dst
}

// open closes the open item unless it is of kind k (and force is false)
// and opens a new one of kind k.
func (e *Encoder) open(dst []byte, k kind, force bool, callID, name string) []byte {
	if e.cur >= 0 && e.items[e.cur].kind == k && !force {
		return dst
	}
	dst = e.close(dst)
	e.items = append(e.items, item{kind: k, start: len(e.arena), end: len(e.arena), callID: callID, name: name})
	e.cur = len(e.items) - 1
	dst = e.event(dst, "response.output_item.added")
	dst = strconv.AppendInt(append(dst, `"output_index":`...), int64(e.cur), 10)
	dst = end(e.appendItem(append(dst, `,"item":`...), e.cur, "in_progress"))
	switch k {
	case message:
		dst = e.partEvent(dst, "response.content_part.added", `{"type":"output_text","annotations":[],"text":""}`, nil)
	case reasoning:
		dst = e.partEvent(dst, "response.content_part.added", `{"type":"reasoning_text","text":""}`, nil)
	}
	return dst
}

// partEvent appends a content-part event of the open item; text, when
// not nil, goes into part (which then ends just before its text).
func (e *Encoder) partEvent(dst []byte, typ, part string, text []byte) []byte {
	dst = e.itemRef(e.event(dst, typ))
	dst = append(append(dst, `,"content_index":0,"part":`...), part...)
	if text != nil {
		dst = append(js.AppendQuoted(dst, text), '}')
	}
	return end(dst)
}

// itemRef appends the open item's item_id and output_index.
func (e *Encoder) itemRef(dst []byte) []byte {
	dst = e.appendID(append(dst, `"item_id":`...), e.cur)
	return strconv.AppendInt(append(dst, `,"output_index":`...), int64(e.cur), 10)
}

// delta appends a delta event of the open item and keeps its text.
func (e *Encoder) delta(dst []byte, typ string, text []byte, content bool) []byte {
	dst = e.itemRef(e.event(dst, typ))
	if content {
		dst = append(dst, `,"content_index":0`...)
	}
	dst = js.AppendQuoted(append(dst, `,"delta":`...), text)
	if typ == "response.output_text.delta" {
		dst = append(dst, `,"logprobs":[]`...)
	}
	e.arena = append(e.arena, text...)
	e.items[e.cur].end = len(e.arena)
	return end(dst)
}

// close appends the ".done" events of the open item.
func (e *Encoder) close(dst []byte) []byte {
	if e.cur < 0 {
		return dst
	}
	it := &e.items[e.cur]
	text := e.arena[it.start:it.end]
	switch it.kind {
	case message:
		dst = e.itemRef(e.event(dst, "response.output_text.done"))
		dst = end(js.AppendQuoted(append(dst, `,"content_index":0,"logprobs":[],"text":`...), text))
		dst = e.partEvent(dst, "response.content_part.done", `{"type":"output_text","annotations":[],"text":`, text)
	case reasoning:
		dst = e.itemRef(e.event(dst, "response.reasoning_text.done"))
		dst = end(js.AppendQuoted(append(dst, `,"content_index":0,"text":`...), text))
		dst = e.partEvent(dst, "response.content_part.done", `{"type":"reasoning_text","text":`, text)
	case functionCall:
		dst = e.itemRef(e.event(dst, "response.function_call_arguments.done"))
		dst = js.AppendQuoted(append(dst, `,"name":`...), it.name)
		dst = end(js.AppendQuoted(append(dst, `,"arguments":`...), text))
	}
	dst = e.event(dst, "response.output_item.done")
	dst = strconv.AppendInt(append(dst, `"output_index":`...), int64(e.cur), 10)
	dst = end(e.appendItem(append(dst, `,"item":`...), e.cur, "completed"))
	e.cur = -1
	return dst
}

// Text appends an output_text delta, opening a message item first.
func (e *Encoder) Text(dst []byte, text []byte, tokens int) []byte {
	dst = e.open(dst, message, false, "", "")
	return e.delta(dst, "response.output_text.delta", text, true)
}

// Reasoning appends a reasoning_text delta, opening a reasoning item.
func (e *Encoder) Reasoning(dst []byte, text []byte, tokens int) []byte {
	dst = e.open(dst, reasoning, false, "", "")
	return e.delta(dst, "response.reasoning_text.delta", text, true)
}

// ToolCall opens a function_call item and appends its first argument
// fragment, if any.
func (e *Encoder) ToolCall(dst []byte, id, name string, args []byte, tokens int) []byte {
	dst = e.open(dst, functionCall, true, id, name)
	if len(args) == 0 {
		return dst
	}
	return e.delta(dst, "response.function_call_arguments.delta", args, false)
}

// ToolArgs appends an argument fragment of the open function call.
func (e *Encoder) ToolArgs(dst []byte, args []byte, tokens int) []byte {
	if e.cur < 0 || e.items[e.cur].kind != functionCall {
		return dst
	}
	return e.delta(dst, "response.function_call_arguments.delta", args, false)
}

// End closes the open item and keeps the usage for the terminal event.
func (e *Encoder) End(dst []byte, u api.Usage) []byte {
	e.u = u
	return e.close(dst)
}

// Done appends response.completed, or response.incomplete for a length
// finish, with the whole output and the usage.
func (e *Encoder) Done(dst []byte) []byte {
	typ, status := "response.completed", "completed"
	if e.fin == api.FinishLength {
		typ, status = "response.incomplete", "incomplete"
	}
	dst = e.event(dst, typ)
	return end(e.appendResponse(append(dst, `"response":`...), status, true, &e.u))
}

// Error appends an error event: {type:"error", code, message, param}.
func (e *Encoder) Error(dst []byte, typ, msg string) []byte {
	dst = js.AppendQuoted(append(e.event(dst, "error"), `"code":`...), typ)
	dst = js.AppendQuoted(append(dst, `,"message":`...), msg)
	return end(append(dst, `,"param":null`...))
}

// Body appends a whole response object for a.
func (e *Encoder) Body(dst []byte, h *api.Head, a *api.Answer) []byte {
	e.h, e.items, e.cur, e.arena = *h, e.items[:0], -1, e.arena[:0]
	add := func(k kind, text, callID, name string) {
		start := len(e.arena)
		e.arena = append(e.arena, text...)
		e.items = append(e.items, item{kind: k, start: start, end: len(e.arena), callID: callID, name: name})
	}
	if a.Reasoning != "" {
		add(reasoning, a.Reasoning, "", "")
	}
	if a.Text != "" || len(a.ToolCalls) == 0 {
		add(message, a.Text, "", "")
	}
	for _, tc := range a.ToolCalls {
		add(functionCall, tc.Arguments, tc.ID, tc.Name)
	}
	status := "completed"
	if a.Finish == api.FinishLength {
		status = "incomplete"
	}
	return e.appendResponse(dst, status, true, &a.Usage)
}

// appendUsage appends the Responses usage object; a field not reported is
// written as 0.
func appendUsage(dst []byte, u api.Usage) []byte {
	in, out := max(u.Prompt, 0), max(u.Completion, 0)
	dst = strconv.AppendInt(append(dst, `{"input_tokens":`...), in, 10)
	dst = strconv.AppendInt(append(dst, `,"input_tokens_details":{"cached_tokens":`...), max(u.Cached, 0), 10)
	dst = strconv.AppendInt(append(dst, `},"output_tokens":`...), out, 10)
	dst = strconv.AppendInt(append(dst, `,"output_tokens_details":{"reasoning_tokens":`...), max(u.Reasoning, 0), 10)
	dst = strconv.AppendInt(append(dst, `},"total_tokens":`...), in+out, 10)
	return append(dst, '}')
}
