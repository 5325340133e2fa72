package chat

import (
	"bytes"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Decoder reads chat completion chunks (choices[].delta) and completion
// chunks (choices[].text): each SSE event is one JSON chunk, the stream
// ends with data: [DONE]. The non-streaming bodies have the same keys
// (choices[].message, choices[].text), so Body reads them alike.
//
// What it reads: choices[].delta.content and .text (answer text),
// .reasoning_content and .reasoning (reasoning), .tool_calls (tool calls,
// see tools.go), finish_reason "tool_calls", usage (prompt_tokens,
// completion_tokens, prompt_tokens_details.cached_tokens, its media
// tokens (audio_tokens, vLLM's multimodal_tokens by modality),
// completion_tokens_details.reasoning_tokens), and an error: an "error"
// member, vLLM's older {"object":"error","message":...}, or an event named
// "error". A chunk with choices is an output event (vLLM's benchmark lists
// them so, the role-only first chunk included); one with a Responses or
// Messages "type" and no choices is another API's answer.
type Decoder struct {
	c chunk
}

// NewDecoder returns a chat (and completions) decoder.
func NewDecoder() *Decoder { return &Decoder{} }

// Reset readies d for a new response: a chunk carries all it needs, so
// there is nothing to forget.
func (d *Decoder) Reset() {}

// Terminal is the end of a complete chat stream.
func (d *Decoder) Terminal() string { return "data: [DONE]" }

// Event decodes one chunk.
func (d *Decoder) Event(name, data []byte, out *api.Out, ev *api.Event) {
	if string(data) == "[DONE]" {
		ev.End = true
		return
	}
	d.decode(data, out, ev)
	if string(name) == "error" {
		ev.ServerError = true
	}
}

// Body decodes a non-streaming chat or completion body.
func (d *Decoder) Body(data []byte, out *api.Out, ev *api.Event) {
	d.decode(data, out, ev)
}

func (d *Decoder) decode(data []byte, out *api.Out, ev *api.Event) {
	c := &d.c
	c.reset(out, ev)
	i := js.SkipWS(data, 0)
	i = js.WalkObject(data, i, 0, c, chunkField)
	if i < 0 || js.SkipWS(data, i) != len(data) {
		ev.Invalid = true
		return
	}
	ev.Output = c.choices > 0
	if c.isError {
		ev.ServerError, ev.ErrMsg = true, c.errMsg
	}
	if !c.hasChoices && !c.isError {
		ev.WrongAPI = foreign(c.typ, c.object)
	}
}

// foreign names the API a chunk-less event belongs to by its "type" (or,
// for a non-streaming body, "object"), or "" when it is none known.
func foreign(typ, object []byte) api.Name {
	switch {
	case bytes.HasPrefix(typ, []byte("response.")), string(object) == "response":
		return api.Responses
	}
	switch string(typ) {
	case "message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta", "content_block_stop", "ping", "message":
		return api.Messages
	}
	return ""
}

// chunk is what one event's JSON says, as far as a recording cares. The
// walk functions below fill it; text goes straight into the Out's buffers
// so nothing is copied twice.
type chunk struct {
	out        *api.Out
	ev         *api.Event
	choices    int  // elements of "choices"
	hasChoices bool // a "choices" member, whatever its value
	isError    bool // "error" present (not null), or "object":"error"
	errMsg     []byte
	typ        []byte // the raw top-level "type" value, if a string
	object     []byte // the top-level "object" value, decoded
	tools      fragment
}

func (c *chunk) reset(out *api.Out, ev *api.Event) {
	c.out, c.ev, c.choices, c.hasChoices, c.isError = out, ev, 0, false, false
	c.errMsg, c.typ, c.object = c.errMsg[:0], nil, c.object[:0]
}

func chunkField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "choices":
		c.hasChoices = true
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == 'n' {
			return js.Literal(b, i, "null")
		}
		return js.WalkArray(b, i, depth+1, c, choiceElem)
	case "usage":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, usageField)
		}
		return js.SkipValue(b, i, depth)
	case "error":
		i = js.SkipWS(b, i)
		if i < len(b) {
			switch b[i] {
			case 'n':
				return js.Literal(b, i, "null")
			case '{':
				c.isError = true
				return js.WalkObject(b, i, depth+1, c, errorField)
			case '"':
				c.isError = true
				i, c.errMsg = js.AppendString(b, i, c.errMsg[:0])
				return i
			}
		}
		c.isError = true
		return js.SkipValue(b, i, depth)
	case "object":
		// vLLM's older error shape: {"object":"error","message":...}.
		i, c.object = js.AppendString(b, i, c.object[:0])
		if string(c.object) == "error" {
			c.isError = true
		}
		return i
	case "message":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '"' {
			i, c.errMsg = js.AppendString(b, i, c.errMsg[:0])
			return i
		}
		return js.SkipValue(b, i, depth)
	case "type":
		var ok bool
		if i, c.typ, ok = js.String(b, i, depth); !ok {
			c.typ = nil
		}
		return i
	}
	return js.SkipValue(b, i, depth)
}

func choiceElem(c *chunk, b []byte, i, depth int) int {
	i = js.SkipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return js.SkipValue(b, i, depth)
	}
	c.choices++
	return js.WalkObject(b, i, depth+1, c, choiceField)
}

func choiceField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "delta", "message": // streaming chat, non-streaming chat
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, deltaField)
		}
	case "text": // completions
		return textValue(b, i, depth, &c.out.Text)
	case "finish_reason":
		return finishReason(c, b, i, depth)
	}
	return js.SkipValue(b, i, depth)
}

func deltaField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "content":
		return textValue(b, i, depth, &c.out.Text)
	case "reasoning_content", "reasoning":
		return textValue(b, i, depth, &c.out.Reasoning)
	case "tool_calls":
		return toolCallsValue(c, b, i, depth)
	}
	return js.SkipValue(b, i, depth)
}

// textValue appends a string value to *dst; null and other types (content
// parts) are skipped.
func textValue(b []byte, i, depth int, dst *[]byte) int {
	i = js.SkipWS(b, i)
	if i < len(b) && b[i] == '"' {
		i, *dst = js.AppendString(b, i, *dst)
		return i
	}
	return js.SkipValue(b, i, depth)
}

func usageField(c *chunk, key, b []byte, i, depth int) int {
	u := &c.ev.Usage
	switch string(key) {
	case "prompt_tokens":
		i, u.Prompt = js.ReadInt(b, i)
		return i
	case "completion_tokens":
		i, u.Completion = js.ReadInt(b, i)
		return i
	case "prompt_tokens_details":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, promptDetailsField)
		}
	case "completion_tokens_details":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, completionDetailsField)
		}
	}
	return js.SkipValue(b, i, depth)
}

func promptDetailsField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "cached_tokens":
		i, c.ev.Usage.Cached = js.ReadInt(b, i)
		return i
	case "audio_tokens": // OpenAI's
		i, c.ev.Usage.Media.Audio = js.ReadInt(b, i)
		return i
	case "multimodal_tokens": // vLLM's, by modality
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, modalityField)
		}
	}
	return js.SkipValue(b, i, depth)
}

// modalityField reads one modality of vLLM's multimodal_tokens; kinds
// tracekit does not send are skipped.
func modalityField(c *chunk, key, b []byte, i, depth int) int {
	m := &c.ev.Usage.Media
	switch string(key) {
	case "image":
		i, m.Image = js.ReadInt(b, i)
		return i
	case "video":
		i, m.Video = js.ReadInt(b, i)
		return i
	case "audio":
		i, m.Audio = js.ReadInt(b, i)
		return i
	}
	return js.SkipValue(b, i, depth)
}

func completionDetailsField(c *chunk, key, b []byte, i, depth int) int {
	if string(key) == "reasoning_tokens" {
		i, c.ev.Usage.Reasoning = js.ReadInt(b, i)
		return i
	}
	return js.SkipValue(b, i, depth)
}

func errorField(c *chunk, key, b []byte, i, depth int) int {
	if string(key) == "message" {
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '"' {
			i, c.errMsg = js.AppendString(b, i, c.errMsg[:0])
			return i
		}
	}
	return js.SkipValue(b, i, depth)
}
