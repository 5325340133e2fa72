package api

import js "github.com/tracekit/tracekit/internal/api/jsonscan"

// ListDecoder parses the response bodies of a non-generating API
// (embeddings, rerank, score): what a recording needs of them is the
// number of items returned (the elements of the first of its list members
// present, or of a bare array), the prompt tokens (usage.prompt_tokens,
// else usage.total_tokens), or the error: OpenAI's envelope
// {"error":{"message","type",...}}, vLLM's older {"object":"error",
// "message"}. A chat, Responses or Messages answer is another API's. The
// API packages say which members hold their items.
type ListDecoder struct {
	r     result
	lists []string
}

// NewListDecoder returns a decoder counting the elements of the first of
// lists present in a body.
func NewListDecoder(lists ...string) *ListDecoder { return &ListDecoder{lists: lists} }

// Reset does nothing: a body carries all it needs.
func (d *ListDecoder) Reset() {}

// Terminal: the API answers with one body.
func (d *ListDecoder) Terminal() string { return "a response body" }

// Event treats an event's data as a body (these APIs do not stream; a
// server that frames its answer as an event is read all the same).
func (d *ListDecoder) Event(name, data []byte, out *Out, ev *Event) {
	if string(data) == "[DONE]" {
		return
	}
	d.Body(data, out, ev)
}

// Body parses a response body.
func (d *ListDecoder) Body(data []byte, out *Out, ev *Event) {
	d.r.read(data, d.lists, ev)
	d.r.report(out, ev)
}

// result is what a non-generating API's body says.
type result struct {
	lists      []string // the members that may hold the items
	items      int64    // elements of the list, -1 when there is none
	u          Usage
	total      int64
	hasChoices bool
	isError    bool
	object     []byte
	errType    []byte
	errMsg     []byte
	typ        []byte
}

func (r *result) read(data []byte, lists []string, ev *Event) {
	r.lists, r.items, r.u, r.total, r.hasChoices, r.isError = lists, -1, NoUsage, -1, false, false
	r.object, r.errType, r.errMsg, r.typ = r.object[:0], r.errType[:0], r.errMsg[:0], nil
	i := js.SkipWS(data, 0)
	if i < len(data) && data[i] == '[' { // a bare array of results (TEI, SGLang rerank)
		r.items = 0
		i = js.WalkArray(data, i, 1, r, countElem)
	} else {
		i = js.WalkObject(data, i, 0, r, resultField)
	}
	if i < 0 || js.SkipWS(data, i) != len(data) {
		ev.Invalid = true
	}
}

func (r *result) report(out *Out, ev *Event) {
	switch {
	case ev.Invalid:
	case r.isError:
		ev.ServerError, ev.ErrType, ev.ErrMsg = true, r.errType, r.errMsg
	case r.hasChoices:
		ev.WrongAPI = Chat
	case string(r.object) == "response":
		ev.WrongAPI = Responses
	case string(r.typ) == "message":
		ev.WrongAPI = Messages
	case r.items < 0:
		ev.Unknown = true
	default:
		if r.u.Prompt < 0 {
			r.u.Prompt = r.total // Jina's rerank reports only total_tokens: all of it is input
		}
		ev.Usage, ev.Output, out.Items = r.u, true, r.items
	}
}

func resultField(r *result, key, b []byte, i, depth int) int {
	for _, l := range r.lists {
		if string(key) == l && r.items < 0 {
			i = js.SkipWS(b, i)
			if i < len(b) && b[i] == '[' {
				r.items = 0
				return js.WalkArray(b, i, depth+1, r, countElem)
			}
			return js.SkipValue(b, i, depth)
		}
	}
	switch string(key) {
	case "usage":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, r, usageField)
		}
	case "error":
		i = js.SkipWS(b, i)
		if i < len(b) {
			switch b[i] {
			case 'n':
				return js.Literal(b, i, "null")
			case '{':
				r.isError = true
				return js.WalkObject(b, i, depth+1, r, errorField)
			case '"':
				r.isError = true
				i, r.errMsg = js.AppendString(b, i, r.errMsg[:0])
				return i
			}
		}
	case "object":
		i, r.object = js.AppendString(b, i, r.object[:0])
		if string(r.object) == "error" {
			r.isError = true
		}
		return i
	case "message":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '"' && len(r.errMsg) == 0 {
			i, r.errMsg = js.AppendString(b, i, r.errMsg[:0])
			return i
		}
	case "type":
		var ok bool
		if i, r.typ, ok = js.String(b, i, depth); !ok {
			r.typ = nil
		}
		return i
	case "choices":
		r.hasChoices = true
	}
	return js.SkipValue(b, i, depth)
}

func countElem(r *result, b []byte, i, depth int) int {
	r.items++
	return js.SkipValue(b, i, depth)
}

func usageField(r *result, key, b []byte, i, depth int) int {
	switch string(key) {
	case "prompt_tokens":
		i, r.u.Prompt = js.ReadInt(b, i)
		return i
	case "total_tokens":
		i, r.total = js.ReadInt(b, i)
		return i
	}
	return js.SkipValue(b, i, depth)
}

func errorField(r *result, key, b []byte, i, depth int) int {
	switch string(key) {
	case "message":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '"' {
			i, r.errMsg = js.AppendString(b, i, r.errMsg[:0])
			return i
		}
	case "type":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '"' {
			i, r.errType = js.AppendString(b, i, r.errType[:0])
			return i
		}
	}
	return js.SkipValue(b, i, depth)
}
