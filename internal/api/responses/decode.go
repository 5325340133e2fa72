// Package responses is the OpenAI Responses API (POST /v1/responses): the
// decoder of its event stream and of its response body, and the mock's
// encoder of both.
//
// The stream is typed events, "event: <type>" then "data: <json>" whose
// "type" repeats the name (the decoder keys on the JSON "type", the event
// name standing in when a server leaves "type" out). The events that
// matter to a recording (event names from the OpenAI SDKs' stream event
// union):
//
//	response.output_text.delta              answer text          {item_id, output_index, content_index, delta}
//	response.refusal.delta                  answer text (a refusal is what the model said)
//	response.reasoning_text.delta           reasoning (vLLM)     {item_id, output_index, content_index, delta}
//	response.reasoning_summary_text.delta   reasoning (OpenAI, Ollama) {item_id, output_index, summary_index, delta}
//	response.output_item.added              a function_call item starts a tool call {item:{type, id, call_id, name}}
//	response.function_call_arguments.delta  tool call arguments  {item_id, output_index, delta}
//	response.completed / .incomplete        the end, with response.usage
//	response.failed                         the end, with response.error {code, message}
//	error                                   an error             {code, message, param}
//
// Usage is only in the terminal event: response.usage {input_tokens,
// input_tokens_details.cached_tokens, output_tokens (reasoning included),
// output_tokens_details.reasoning_tokens}. There is no data: [DONE]; one
// a server adds anyway is ignored. response.incomplete is a complete
// stream that stopped at max_output_tokens (or a content filter), as a
// chat answer with finish_reason "length" is: not an error. A stream that
// ends before a terminal event is truncated.
//
// Text, reasoning and argument deltas are the output events. Their
// ".done" counterparts repeat the whole text; the decoder takes it only
// when no delta brought any (a server that streams an item whole), so
// nothing is counted twice. vLLM also puts the first argument fragment in
// output_item.added's item and streams it again as a delta: the decoder
// takes arguments from deltas only. Other event types of the union
// (content parts, annotations, hosted tools' progress) are known and
// ignored; a type outside the union is counted as unknown, which the API
// asks clients to tolerate.
package responses

import (
	"bytes"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Decoder reads Responses API streams and bodies.
type Decoder struct {
	f       fields
	calls   []call // the answer's function calls, by tool-call index
	text    int    // text deltas since the last output_text.done or refusal.done
	reason  int    // reasoning deltas since the last reasoning (summary) text done
	scratch []byte // a decoded argument fragment
	errType []byte
	errMsg  []byte
	u       api.Usage
	// Walk states of nested objects, here rather than on the stack: a
	// pointer handed to the generic walk escapes.
	r     fields     // a response object, an error object
	item  itemFields // an output item
	part  itemFields // a content part
	walkB bodyWalk
}

// call is one function_call item: how its events name it.
type call struct {
	itemID  []byte
	outIdx  int64
	sawArgs bool
}

// NewDecoder returns a Responses decoder.
func NewDecoder() *Decoder { return &Decoder{} }

// Reset forgets the previous response's calls.
func (d *Decoder) Reset() {
	d.calls = d.calls[:0]
	d.text, d.reason = 0, 0
}

// Terminal is what a complete stream ends with.
func (d *Decoder) Terminal() string { return "response.completed (or .incomplete or .failed)" }

// fields are the top-level members of one event (or a body's members), as
// raw spans of data: their meaning depends on "type", which some servers
// put last (pydantic writes the SDK's fields in alphabetical order).
type fields struct {
	typ, delta, text, args, itemID, response, item, errObj, code, message, object, status, output, usage []byte
	id                                                                                                   []byte // a response object's id
	outIdx                                                                                               int64
	hasChoices                                                                                           bool
}

func (f *fields) reset() { *f = fields{outIdx: -1} }

func topField(f *fields, key, b []byte, i, depth int) int {
	var v []byte
	switch string(key) {
	case "type":
		var ok bool
		i, v, ok = js.String(b, i, depth)
		if ok {
			f.typ = v
		}
		return i
	case "delta":
		i, f.delta = js.Span(b, i, depth)
	case "item_id":
		i, f.itemID, _ = js.String(b, i, depth)
	case "id":
		i, f.id, _ = js.String(b, i, depth)
	case "output_index":
		i, f.outIdx = js.ReadInt(b, i)
	case "text":
		i, f.text = js.Span(b, i, depth)
	case "arguments":
		i, f.args = js.Span(b, i, depth)
	case "response":
		i, f.response = js.Span(b, i, depth)
	case "item":
		i, f.item = js.Span(b, i, depth)
	case "error":
		i, f.errObj = js.Span(b, i, depth)
	case "code":
		i, f.code = js.Span(b, i, depth)
	case "message":
		i, f.message = js.Span(b, i, depth)
	case "object":
		i, f.object, _ = js.String(b, i, depth)
	case "status":
		i, f.status, _ = js.String(b, i, depth)
	case "output":
		i, f.output = js.Span(b, i, depth)
	case "usage":
		i, f.usage = js.Span(b, i, depth)
	case "choices":
		f.hasChoices = true
		return js.SkipValue(b, i, depth)
	default:
		return js.SkipValue(b, i, depth)
	}
	return i
}

// walk reads data's top-level members into d.f; false when data is not
// one JSON object.
func (d *Decoder) walk(data []byte) bool {
	d.f.reset()
	i := js.SkipWS(data, 0)
	i = js.WalkObject(data, i, 0, &d.f, topField)
	return i >= 0 && js.SkipWS(data, i) == len(data)
}

// Event decodes one event.
func (d *Decoder) Event(name, data []byte, out *api.Out, ev *api.Event) {
	if string(data) == "[DONE]" {
		return
	}
	if !d.walk(data) {
		ev.Invalid = true
		return
	}
	f := &d.f
	typ := f.typ
	if typ == nil {
		typ = name
	}
	switch string(typ) {
	case "response.output_text.delta", "response.refusal.delta":
		d.text++
		d.appendDelta(f.delta, &out.Text, ev)
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		d.reason++
		d.appendDelta(f.delta, &out.Reasoning, ev)
	case "response.function_call_arguments.delta":
		d.args(f.delta, out, ev, false)
	case "response.output_text.done":
		d.whole(&d.text, f.text, &out.Text, ev)
	case "response.refusal.done":
		d.text = 0 // its full text (in "refusal") repeats the deltas
	case "response.reasoning_text.done", "response.reasoning_summary_text.done":
		d.whole(&d.reason, f.text, &out.Reasoning, ev)
	case "response.function_call_arguments.done":
		d.args(f.args, out, ev, true)
	case "response.output_item.added":
		d.itemAdded(f.item, f.outIdx, out, ev)
	case "response.created", "response.in_progress":
		d.responseID(f.response, out)
	case "response.completed", "response.incomplete", "response.failed":
		ev.End = true
		d.response(f.response, out, ev)
		if string(typ) == "response.completed" && out.Tools.Len() > 0 {
			out.Tools.Finished = true
		}
	case "error":
		d.serverError(f, ev)
	case "":
		switch {
		case f.hasChoices:
			ev.WrongAPI = api.Chat
		case f.errObj != nil && string(f.errObj) != "null":
			d.serverError(f, ev)
		default:
			ev.Unknown = true
		}
	default:
		switch {
		case known(typ):
		case messagesType(typ):
			ev.WrongAPI = api.Messages
		default:
			ev.Unknown = true
		}
	}
}

// appendDelta appends a text delta to dst: an output event.
func (d *Decoder) appendDelta(delta []byte, dst *[]byte, ev *api.Event) {
	if delta == nil {
		return
	}
	if i, v := js.AppendString(delta, 0, *dst); i < 0 {
		ev.Invalid = true
	} else {
		*dst = v
		ev.Output = true
	}
}

// whole takes a ".done" event's full text when no delta came before it.
func (d *Decoder) whole(deltas *int, text []byte, dst *[]byte, ev *api.Event) {
	if *deltas == 0 {
		d.appendDelta(text, dst, ev)
	}
	*deltas = 0
}

// callIndex finds the tool call an event names by its item id, or by its
// output index when it has none; -1 when it names none known.
func (d *Decoder) callIndex(itemID []byte, outIdx int64) int {
	for k := range d.calls {
		c := &d.calls[k]
		if itemID != nil && len(c.itemID) > 0 {
			if bytes.Equal(c.itemID, itemID) {
				return k
			}
		} else if outIdx >= 0 && c.outIdx == outIdx {
			return k
		}
	}
	return -1
}

// newCall adds a call named by itemID and outIdx and returns its index.
func (d *Decoder) newCall(itemID []byte, outIdx int64) int {
	k := len(d.calls)
	if k < cap(d.calls) {
		d.calls = d.calls[:k+1]
	} else {
		d.calls = append(d.calls, call{})
	}
	c := &d.calls[k]
	c.itemID, c.outIdx, c.sawArgs = append(c.itemID[:0], itemID...), outIdx, false
	return k
}

// args handles a function_call_arguments delta, or (done) the whole
// arguments when no delta brought any.
func (d *Decoder) args(v []byte, out *api.Out, ev *api.Event, done bool) {
	k := d.callIndex(d.f.itemID, d.f.outIdx)
	if k < 0 {
		if len(d.calls) >= api.MaxToolCalls {
			ev.Fault = api.FaultToolIndex
			return
		}
		k = d.newCall(d.f.itemID, d.f.outIdx) // a server that skipped output_item.added
	}
	c := &d.calls[k]
	if done && c.sawArgs || v == nil {
		return
	}
	i, frag := js.AppendString(v, 0, d.scratch[:0])
	d.scratch = frag
	if i < 0 {
		ev.Invalid = true
		return
	}
	c.sawArgs = true
	if !out.Tools.Add(k, nil, nil, frag, out.Event) {
		ev.Fault = api.FaultToolIndex
		return
	}
	ev.Output = true
}

// itemFields are an output item's members.
type itemFields struct {
	typ, id, callID, name, args, content, summary, text, refusal []byte
}

func itemField(f *itemFields, key, b []byte, i, depth int) int {
	switch string(key) {
	case "type":
		i, f.typ, _ = js.String(b, i, depth)
	case "id":
		i, f.id, _ = js.String(b, i, depth)
	case "call_id":
		i, f.callID = js.Span(b, i, depth)
	case "name":
		i, f.name = js.Span(b, i, depth)
	case "arguments":
		i, f.args = js.Span(b, i, depth)
	case "content":
		i, f.content = js.Span(b, i, depth)
	case "summary":
		i, f.summary = js.Span(b, i, depth)
	case "text":
		i, f.text = js.Span(b, i, depth)
	case "refusal":
		i, f.refusal = js.Span(b, i, depth)
	default:
		return js.SkipValue(b, i, depth)
	}
	return i
}

// readItem reads an item (or a content part: the same few keys) into f.
func readItem(v []byte, f *itemFields) bool {
	*f = itemFields{}
	i := js.WalkObject(v, js.SkipWS(v, 0), 1, f, itemField)
	return i >= 0
}

// itemAdded starts a tool call for a function_call item: its call_id and
// name; its arguments come with the deltas.
func (d *Decoder) itemAdded(v []byte, outIdx int64, out *api.Out, ev *api.Event) {
	if v == nil {
		return
	}
	it := &d.item
	if !readItem(v, it) {
		ev.Invalid = true
		return
	}
	if string(it.typ) != "function_call" {
		return
	}
	if len(d.calls) >= api.MaxToolCalls {
		ev.Fault = api.FaultToolIndex
		return
	}
	k := d.newCall(it.id, outIdx)
	d.addCall(k, it.callID, it.name, nil, out, ev)
}

// addCall adds call k's id and name (decoded from their spans) and args.
func (d *Decoder) addCall(k int, callID, name, args []byte, out *api.Out, ev *api.Event) {
	s := d.scratch[:0]
	i, s := js.AppendString(callID, 0, s)
	idEnd := len(s)
	j, s := js.AppendString(name, 0, s)
	nameEnd := len(s)
	n := 0
	if args != nil {
		n, s = js.AppendString(args, 0, s)
	}
	d.scratch = s
	if callID != nil && i < 0 || name != nil && j < 0 || n < 0 {
		ev.Invalid = true
		return
	}
	if !out.Tools.Add(k, s[:idEnd], s[idEnd:nameEnd], s[nameEnd:], out.Event) {
		ev.Fault = api.FaultToolIndex
	}
}

// response reads a terminal event's response object: usage, and the
// error of a failed one.
// responseID keeps the id of the response object v (response.created,
// response.in_progress) in out.
func (d *Decoder) responseID(v []byte, out *api.Out) {
	if len(v) == 0 || v[0] != '{' {
		return
	}
	r := &d.r
	r.reset()
	if js.WalkObject(v, js.SkipWS(v, 0), 1, r, topField) >= 0 && len(r.id) > 0 {
		out.ResponseID = append(out.ResponseID[:0], r.id...)
	}
}

func (d *Decoder) response(v []byte, out *api.Out, ev *api.Event) {
	if v == nil || string(v) == "null" {
		return
	}
	r := &d.r
	r.reset()
	if js.WalkObject(v, js.SkipWS(v, 0), 1, r, topField) < 0 {
		ev.Invalid = true
		return
	}
	if len(r.id) > 0 {
		out.ResponseID = append(out.ResponseID[:0], r.id...)
	}
	d.usage(r.usage, ev)
	if string(r.status) == "failed" || r.errObj != nil && string(r.errObj) != "null" {
		d.serverError(r, ev)
	}
}

func (d *Decoder) usage(v []byte, ev *api.Event) {
	if v == nil || v[0] != '{' {
		return
	}
	d.u = api.NoUsage
	if js.WalkObject(v, 0, 1, d, usageField) < 0 {
		ev.Invalid = true
		return
	}
	ev.Usage = d.u
}

func usageField(d *Decoder, key, b []byte, i, depth int) int {
	switch string(key) {
	case "input_tokens":
		i, d.u.Prompt = js.ReadInt(b, i)
		return i
	case "output_tokens":
		i, d.u.Completion = js.ReadInt(b, i)
		return i
	case "input_tokens_details", "output_tokens_details":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, d, detailsField)
		}
	}
	return js.SkipValue(b, i, depth)
}

func detailsField(d *Decoder, key, b []byte, i, depth int) int {
	switch string(key) {
	case "cached_tokens":
		i, d.u.Cached = js.ReadInt(b, i)
		return i
	case "reasoning_tokens":
		i, d.u.Reasoning = js.ReadInt(b, i)
		return i
	}
	return js.SkipValue(b, i, depth)
}

// serverError reports the error an event (or a failed response) carries:
// top-level code and message (the error event), or an error object
// {code or type, message} (response.error, the HTTP error envelope), or
// an error string.
func (d *Decoder) serverError(f *fields, ev *api.Event) {
	ev.ServerError = true
	code, msg := f.code, f.message // spans: a quoted string, a number, null
	var typ []byte                 // raw, unquoted
	switch {
	case len(f.errObj) > 0 && f.errObj[0] == '{':
		obj := f.errObj // f may be d.r, which the walk reuses
		e := &d.r
		e.reset()
		if js.WalkObject(obj, 0, 1, e, topField) >= 0 {
			code, msg, typ = e.code, e.message, e.typ
		}
	case len(f.errObj) > 0 && f.errObj[0] == '"':
		msg = f.errObj
	}
	d.errType = d.errType[:0]
	switch {
	case len(code) > 0 && code[0] == '"':
		_, d.errType = js.AppendString(code, 0, d.errType)
	case len(code) > 0 && string(code) != "null":
		d.errType = append(d.errType, code...)
	default:
		d.errType = append(d.errType, typ...)
	}
	d.errMsg = d.errMsg[:0]
	if len(msg) > 0 && msg[0] == '"' {
		_, d.errMsg = js.AppendString(msg, 0, d.errMsg)
	}
	ev.ErrType, ev.ErrMsg = d.errType, d.errMsg
}

// Body decodes a whole response object (or an error body).
func (d *Decoder) Body(data []byte, out *api.Out, ev *api.Event) {
	if !d.walk(data) {
		ev.Invalid = true
		return
	}
	f := &d.f
	switch {
	case f.hasChoices:
		ev.WrongAPI = api.Chat
		return
	case string(f.typ) == "message":
		ev.WrongAPI = api.Messages
		return
	}
	if string(f.status) == "failed" || f.errObj != nil && string(f.errObj) != "null" {
		d.serverError(f, ev)
		return
	}
	if string(f.object) != "response" && f.output == nil {
		ev.Unknown = true
		return
	}
	if len(f.id) > 0 {
		out.ResponseID = append(out.ResponseID[:0], f.id...)
	}
	d.usage(f.usage, ev)
	if f.output != nil && string(f.output) != "null" {
		d.walkB = bodyWalk{d: d, out: out, ev: ev}
		if js.WalkArray(f.output, 0, 1, &d.walkB, outputElem) < 0 {
			ev.Invalid = true
			return
		}
	}
	if string(f.status) != "incomplete" && out.Tools.Len() > 0 {
		out.Tools.Finished = true
	}
	ev.Output = true
}

// bodyWalk is the state of a walk over a body's output items.
type bodyWalk struct {
	d   *Decoder
	out *api.Out
	ev  *api.Event
	dst *[]byte // where the parts being walked put their text
}

func outputElem(w *bodyWalk, b []byte, i, depth int) int {
	i = js.SkipWS(b, i)
	end, v := js.Span(b, i, depth)
	if end < 0 || v[0] != '{' {
		return end
	}
	it := &w.d.item
	if !readItem(v, it) {
		return -1
	}
	switch string(it.typ) {
	case "message":
		w.dst = &w.out.Text
		if it.content != nil && js.WalkArray(it.content, 0, depth+1, w, partElem) < 0 {
			return -1
		}
	case "reasoning":
		w.dst = &w.out.Reasoning
		if it.content != nil && string(it.content) != "null" && js.WalkArray(it.content, 0, depth+1, w, partElem) < 0 {
			return -1
		}
		if it.summary != nil && js.WalkArray(it.summary, 0, depth+1, w, partElem) < 0 {
			return -1
		}
	case "function_call":
		d := w.d
		if len(d.calls) >= api.MaxToolCalls {
			w.ev.Fault = api.FaultToolIndex
			return end
		}
		k := d.newCall(it.id, -1)
		d.addCall(k, it.callID, it.name, it.args, w.out, w.ev)
	}
	return end
}

// partElem appends a content part's text (output_text, reasoning_text,
// summary_text: "text"; refusal: "refusal").
func partElem(w *bodyWalk, b []byte, i, depth int) int {
	i = js.SkipWS(b, i)
	end, v := js.Span(b, i, depth)
	if end < 0 || v[0] != '{' {
		return end
	}
	p := &w.d.part
	if !readItem(v, p) {
		return -1
	}
	s := p.text
	if string(p.typ) == "refusal" {
		s = p.refusal
	}
	if s != nil && s[0] == '"' {
		if j, t := js.AppendString(s, 0, *w.dst); j >= 0 {
			*w.dst = t
		} else {
			return -1
		}
	}
	return end
}

// messagesType reports whether typ is an Anthropic Messages event type.
func messagesType(typ []byte) bool {
	switch string(typ) {
	case "message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta", "content_block_stop", "ping":
		return true
	}
	return false
}

// known reports whether typ is a Responses stream event type this decoder
// has no use for: the rest of the OpenAI SDKs' stream event union.
func known(typ []byte) bool {
	switch string(typ) {
	case "response.created", "response.in_progress", "response.queued",
		"response.output_item.done", "response.content_part.added", "response.content_part.done",
		"response.output_text.annotation.added",
		"response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
		"response.audio.delta", "response.audio.done", "response.audio.transcript.delta", "response.audio.transcript.done",
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
		"response.code_interpreter_call.completed", "response.code_interpreter_call.in_progress", "response.code_interpreter_call.interpreting",
		"response.compaction.compacting",
		"response.file_search_call.completed", "response.file_search_call.in_progress", "response.file_search_call.searching",
		"response.shell_call_command.added", "response.shell_call_command.delta", "response.shell_call_command.done",
		"response.shell_call_output_content.delta", "response.shell_call_output_content.done",
		"response.web_search_call.completed", "response.web_search_call.in_progress", "response.web_search_call.searching",
		"response.image_generation_call.completed", "response.image_generation_call.generating",
		"response.image_generation_call.in_progress", "response.image_generation_call.partial_image",
		"response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
		"response.mcp_call.completed", "response.mcp_call.failed", "response.mcp_call.in_progress",
		"response.mcp_list_tools.completed", "response.mcp_list_tools.failed", "response.mcp_list_tools.in_progress",
		"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done":
		return true
	}
	return false
}
