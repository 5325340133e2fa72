// Package messages is the Anthropic Messages API (POST /v1/messages): the
// decoder of its event stream and of its message body, and the mock's
// encoder of both.
//
// The stream is typed events, "event: <type>" then "data: <json>" whose
// "type" repeats the name (the decoder keys on the JSON "type"; the event
// name stands in when a server leaves it out, as Anthropic's SDK does).
// Its flow (Anthropic's streaming documentation and the SDK's
// RawMessageStreamEvent union):
//
//	message_start        message.usage: the input side (input_tokens, cache_read_input_tokens, cache_creation_input_tokens)
//	content_block_start  {index, content_block}: text, thinking, or tool_use {id, name, input:{}}
//	content_block_delta  {index, delta}: text_delta {text} (answer), thinking_delta {thinking}
//	                     (reasoning), input_json_delta {partial_json} (tool arguments),
//	                     signature_delta and citations_delta (neither counted)
//	content_block_stop   {index}
//	message_delta        {delta:{stop_reason}, usage}: usage counts are cumulative
//	message_stop         the end
//	ping                 anywhere, ignored
//	error                {error:{type, message}}, e.g. overloaded_error after HTTP 200
//
// Usage: Anthropic's input_tokens leave out the tokens read from or
// written to the cache, so the prompt is input_tokens +
// cache_read_input_tokens + cache_creation_input_tokens, and the cached
// prompt tokens are cache_read_input_tokens (SGLang converts an OpenAI
// usage the same way: input = prompt - cached). Counts split over
// message_start and message_delta are merged, the later count of a field
// winning (vLLM and SGLang send the real input count only in
// message_delta). output_tokens includes thinking; newer servers break it
// down in output_tokens_details.thinking_tokens.
//
// The text, thinking and argument deltas are the output events. A stream
// without message_stop is truncated; vLLM sends data: [DONE] after
// message_stop, which is ignored. Event types outside the flow above
// (and delta types outside the list) are counted as unknown, which the
// API asks clients to tolerate.
package messages

import (
	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Decoder reads Messages API streams and bodies.
type Decoder struct {
	f       fields // the event's members
	sub     fields // a nested object's members: delta, content_block, message, error
	blocks  []int32
	scratch []byte
	errType []byte
	errMsg  []byte
	// The usage so far, Anthropic's own fields; -1 until reported.
	in, cacheRead, cacheWrite, out, thinking int64
	walkB                                    bodyWalk
}

// NewDecoder returns a Messages decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.Reset()
	return d
}

// Reset forgets the previous response's blocks and usage.
func (d *Decoder) Reset() {
	d.blocks = d.blocks[:0]
	d.in, d.cacheRead, d.cacheWrite, d.out, d.thinking = -1, -1, -1, -1, -1
}

// Terminal is what a complete stream ends with.
func (d *Decoder) Terminal() string { return "message_stop" }

// fields are an object's members as raw spans: "type" may come after the
// members whose meaning it decides.
type fields struct {
	typ, delta, block, message, usage, errObj, object                 []byte
	text, thinking, partialJSON, stopReason, id, name, input, content []byte
	index                                                             int64
	hasChoices                                                        bool
}

func (f *fields) reset() { *f = fields{index: -1} }

func field(f *fields, key, b []byte, i, depth int) int {
	switch string(key) {
	case "type":
		var ok bool
		var v []byte
		if i, v, ok = js.String(b, i, depth); ok {
			f.typ = v
		}
		return i
	case "index":
		i, f.index = js.ReadInt(b, i)
		return i
	case "delta":
		i, f.delta = js.Span(b, i, depth)
	case "content_block":
		i, f.block = js.Span(b, i, depth)
	case "message":
		i, f.message = js.Span(b, i, depth)
	case "usage":
		i, f.usage = js.Span(b, i, depth)
	case "error":
		i, f.errObj = js.Span(b, i, depth)
	case "object":
		i, f.object, _ = js.String(b, i, depth)
	case "text":
		i, f.text = js.Span(b, i, depth)
	case "thinking":
		i, f.thinking = js.Span(b, i, depth)
	case "partial_json":
		i, f.partialJSON = js.Span(b, i, depth)
	case "stop_reason":
		i, f.stopReason, _ = js.String(b, i, depth)
	case "id":
		i, f.id = js.Span(b, i, depth)
	case "name":
		i, f.name = js.Span(b, i, depth)
	case "input":
		i, f.input = js.Span(b, i, depth)
	case "content":
		i, f.content = js.Span(b, i, depth)
	case "choices":
		f.hasChoices = true
		return js.SkipValue(b, i, depth)
	default:
		return js.SkipValue(b, i, depth)
	}
	return i
}

// walk reads v's members into f; false when v is not a JSON object.
func walk(v []byte, f *fields, depth int) bool {
	f.reset()
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	return js.WalkObject(v, 0, depth, f, field) >= 0
}

// top reads data's members into d.f; false when data is not one JSON
// object.
func (d *Decoder) top(data []byte) bool {
	d.f.reset()
	i := js.WalkObject(data, js.SkipWS(data, 0), 0, &d.f, field)
	return i >= 0 && js.SkipWS(data, i) == len(data)
}

// Event decodes one event.
func (d *Decoder) Event(name, data []byte, out *api.Out, ev *api.Event) {
	if string(data) == "[DONE]" {
		return
	}
	f := &d.f
	if !d.top(data) {
		ev.Invalid = true
		return
	}
	typ := f.typ
	if typ == nil {
		typ = name
	}
	switch string(typ) {
	case "content_block_delta":
		d.blockDelta(f.index, f.delta, out, ev)
	case "content_block_start":
		d.blockStart(f.index, f.block, out, ev)
	case "content_block_stop", "ping":
	case "message_start":
		if !walk(f.message, &d.sub, 1) {
			ev.Invalid = true
			return
		}
		d.usage(d.sub.usage, ev)
	case "message_delta":
		if f.delta != nil && string(f.delta) != "null" {
			if !walk(f.delta, &d.sub, 1) {
				ev.Invalid = true
				return
			}
			if string(d.sub.stopReason) == "tool_use" {
				out.Tools.Finished = true
			}
		}
		d.usage(f.usage, ev)
	case "message_stop":
		ev.End = true
	case "error":
		d.serverError(f.errObj, ev)
	case "":
		switch {
		case f.hasChoices:
			ev.WrongAPI = api.Chat
		case f.errObj != nil && string(f.errObj) != "null":
			d.serverError(f.errObj, ev)
		default:
			ev.Unknown = true
		}
	default:
		if len(typ) > 9 && string(typ[:9]) == "response." {
			ev.WrongAPI = api.Responses
		} else {
			ev.Unknown = true
		}
	}
}

// blockStart notes a content block; a tool_use block starts a tool call.
func (d *Decoder) blockStart(index int64, block []byte, out *api.Out, ev *api.Event) {
	s := &d.sub
	if !walk(block, s, 1) {
		ev.Invalid = true
		return
	}
	if string(s.typ) != "tool_use" {
		return
	}
	if index < 0 || index >= api.MaxToolCalls || out.Tools.Len() >= api.MaxToolCalls {
		ev.Fault = api.FaultToolIndex
		return
	}
	k := out.Tools.Len()
	d.setBlock(index, k)
	d.addCall(k, s.id, s.name, nil, out, ev)
}

// setBlock maps content block index to tool call k.
func (d *Decoder) setBlock(index int64, k int) {
	for int64(len(d.blocks)) <= index {
		d.blocks = append(d.blocks, 0)
	}
	d.blocks[index] = int32(k + 1)
}

// addCall adds to call k its id and name (decoded from their spans) and
// args as they are (a body's input object, its JSON text).
func (d *Decoder) addCall(k int, id, name, args []byte, out *api.Out, ev *api.Event) {
	s := d.scratch[:0]
	i, s := js.AppendString(id, 0, s)
	idEnd := len(s)
	j, s := js.AppendString(name, 0, s)
	nameEnd := len(s)
	s = append(s, args...)
	d.scratch = s
	if id != nil && i < 0 || name != nil && j < 0 {
		ev.Invalid = true
		return
	}
	if !out.Tools.Add(k, s[:idEnd], s[idEnd:nameEnd], s[nameEnd:], out.Event) {
		ev.Fault = api.FaultToolIndex
	}
}

// blockDelta appends a delta's text to the answer, the reasoning or a
// tool call's arguments.
func (d *Decoder) blockDelta(index int64, delta []byte, out *api.Out, ev *api.Event) {
	s := &d.sub
	if !walk(delta, s, 1) {
		ev.Invalid = true
		return
	}
	var dst *[]byte
	var v []byte
	switch string(s.typ) {
	case "text_delta":
		dst, v = &out.Text, s.text
	case "thinking_delta":
		dst, v = &out.Reasoning, s.thinking
	case "input_json_delta":
		d.toolDelta(index, s.partialJSON, out, ev)
		return
	case "signature_delta", "citations_delta":
		return
	default:
		ev.Unknown = true
		return
	}
	if v == nil {
		return
	}
	if i, t := js.AppendString(v, 0, *dst); i < 0 {
		ev.Invalid = true
	} else {
		*dst = t
		ev.Output = true
	}
}

// toolDelta appends an input_json_delta to the call of block index (a new
// call when no tool_use block started there).
func (d *Decoder) toolDelta(index int64, partial []byte, out *api.Out, ev *api.Event) {
	if partial == nil {
		return
	}
	if index < 0 || index >= api.MaxToolCalls {
		ev.Fault = api.FaultToolIndex
		return
	}
	k := -1
	if index < int64(len(d.blocks)) && d.blocks[index] > 0 {
		k = int(d.blocks[index]) - 1
	} else {
		k = out.Tools.Len()
		d.setBlock(index, k)
	}
	i, frag := js.AppendString(partial, 0, d.scratch[:0])
	d.scratch = frag
	if i < 0 {
		ev.Invalid = true
		return
	}
	if !out.Tools.Add(k, nil, nil, frag, out.Event) {
		ev.Fault = api.FaultToolIndex
		return
	}
	ev.Output = true
}

// usage merges a usage object into the counts so far and reports them.
func (d *Decoder) usage(v []byte, ev *api.Event) {
	if len(v) == 0 || v[0] != '{' {
		return
	}
	if js.WalkObject(v, 0, 2, d, usageField) < 0 {
		ev.Invalid = true
		return
	}
	u := api.Usage{Prompt: -1, Completion: d.out, Cached: d.cacheRead, Reasoning: d.thinking}
	if d.in >= 0 {
		u.Prompt = d.in + max(d.cacheRead, 0) + max(d.cacheWrite, 0)
	}
	ev.Usage = u
}

func usageField(d *Decoder, key, b []byte, i, depth int) int {
	var n int64
	switch string(key) {
	case "input_tokens":
		i, n = js.ReadInt(b, i)
		d.in = keep(n, d.in)
	case "cache_read_input_tokens":
		i, n = js.ReadInt(b, i)
		d.cacheRead = keep(n, d.cacheRead)
	case "cache_creation_input_tokens":
		i, n = js.ReadInt(b, i)
		d.cacheWrite = keep(n, d.cacheWrite)
	case "output_tokens":
		i, n = js.ReadInt(b, i)
		d.out = keep(n, d.out)
	case "output_tokens_details":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, d, detailsField)
		}
		return js.SkipValue(b, i, depth)
	default:
		return js.SkipValue(b, i, depth)
	}
	return i
}

func detailsField(d *Decoder, key, b []byte, i, depth int) int {
	if string(key) == "thinking_tokens" {
		var n int64
		i, n = js.ReadInt(b, i)
		d.thinking = keep(n, d.thinking)
		return i
	}
	return js.SkipValue(b, i, depth)
}

// keep is a newly read count, or the old one when the new is null.
func keep(n, old int64) int64 {
	if n < 0 {
		return old
	}
	return n
}

// serverError reports an error object {type, message} (or a string).
func (d *Decoder) serverError(obj []byte, ev *api.Event) {
	ev.ServerError = true
	d.errType, d.errMsg = d.errType[:0], d.errMsg[:0]
	switch {
	case len(obj) > 0 && obj[0] == '"':
		_, d.errMsg = js.AppendString(obj, 0, d.errMsg)
	case walk(obj, &d.sub, 1):
		d.errType = append(d.errType, d.sub.typ...)
		if m := d.sub.message; len(m) > 0 && m[0] == '"' {
			_, d.errMsg = js.AppendString(m, 0, d.errMsg)
		}
	}
	ev.ErrType, ev.ErrMsg = d.errType, d.errMsg
}

// Body decodes a whole message (or an error body).
func (d *Decoder) Body(data []byte, out *api.Out, ev *api.Event) {
	f := &d.f
	if !d.top(data) {
		ev.Invalid = true
		return
	}
	switch {
	case f.hasChoices:
		ev.WrongAPI = api.Chat
		return
	case string(f.object) == "response":
		ev.WrongAPI = api.Responses
		return
	case string(f.typ) == "error" || f.errObj != nil && string(f.errObj) != "null":
		d.serverError(f.errObj, ev)
		return
	case string(f.typ) != "message":
		ev.Unknown = true
		return
	}
	stop := string(f.stopReason)
	d.usage(f.usage, ev)
	if f.content != nil && string(f.content) != "null" {
		d.walkB = bodyWalk{d: d, out: out, ev: ev}
		if js.WalkArray(f.content, 0, 1, &d.walkB, blockElem) < 0 {
			ev.Invalid = true
			return
		}
	}
	if stop == "tool_use" {
		out.Tools.Finished = true
	}
	ev.Output = true
}

type bodyWalk struct {
	d   *Decoder
	out *api.Out
	ev  *api.Event
}

// blockElem reads one content block of a body.
func blockElem(w *bodyWalk, b []byte, i, depth int) int {
	i = js.SkipWS(b, i)
	end, v := js.Span(b, i, depth)
	if end < 0 || v[0] != '{' {
		return end
	}
	s := &w.d.sub
	if !walk(v, s, depth+1) {
		return -1
	}
	var dst *[]byte
	var t []byte
	switch string(s.typ) {
	case "text":
		dst, t = &w.out.Text, s.text
	case "thinking":
		dst, t = &w.out.Reasoning, s.thinking
	case "tool_use":
		k := w.out.Tools.Len()
		if k >= api.MaxToolCalls {
			w.ev.Fault = api.FaultToolIndex
			return end
		}
		w.d.addCall(k, s.id, s.name, s.input, w.out, w.ev)
		return end
	default:
		return end
	}
	if t != nil && t[0] == '"' {
		j, x := js.AppendString(t, 0, *dst)
		if j < 0 {
			return -1
		}
		*dst = x
	}
	return end
}
