package transcription

import (
	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Decoder reads both stream shapes and the bodies (see the package doc):
// one decoder for both, so a run need not know which server it talks to.
//
// Output events are OpenAI's transcript.text.delta events and vLLM's
// chunks with choices (what vLLM's benchmark times); their text is the
// transcript. transcript.text.done and data: [DONE] end a stream; the done
// event's whole text is not appended again. Usage: prompt_tokens or
// input_tokens, completion_tokens or output_tokens; a duration usage
// (seconds) reports no tokens. An "error" member, or "type":"error", is
// the server's error; a chat or Responses answer is another API's.
type Decoder struct {
	c chunk
}

// NewDecoder returns a transcription (and translation) decoder.
func NewDecoder() *Decoder { return &Decoder{} }

// Reset readies d for a new response: each event carries all it needs.
func (d *Decoder) Reset() {}

// Terminal names the events a complete stream ends with.
func (d *Decoder) Terminal() string { return "transcript.text.done or data: [DONE]" }

// Event decodes one event of either shape.
func (d *Decoder) Event(name, data []byte, out *api.Out, ev *api.Event) {
	if string(data) == "[DONE]" {
		ev.End = true
		return
	}
	d.decode(data, out, ev, false)
	if string(name) == "error" {
		ev.ServerError = true
	}
}

// Body decodes a non-streaming body: {"text", "usage"}.
func (d *Decoder) Body(data []byte, out *api.Out, ev *api.Event) {
	d.decode(data, out, ev, true)
}

func (d *Decoder) decode(data []byte, out *api.Out, ev *api.Event, body bool) {
	c := &d.c
	c.reset(out, ev)
	i := js.SkipWS(data, 0)
	i = js.WalkObject(data, i, 0, c, chunkField)
	if i < 0 || js.SkipWS(data, i) != len(data) {
		ev.Invalid = true
		return
	}
	switch {
	case c.isError || string(c.typ) == "error":
		ev.ServerError, ev.ErrMsg, ev.ErrType = true, c.errMsg, c.errType
	case string(c.typ) == "transcript.text.delta":
		out.Text = append(out.Text, c.delta...)
		ev.Output = true
	case string(c.typ) == "transcript.text.done":
		ev.End = true
		if body {
			out.Text, ev.Output = append(out.Text, c.text...), true
		}
	case c.object == objChat:
		ev.WrongAPI = api.Chat
	case c.choices > 0:
		ev.Output = true
	case body && c.hasText:
		out.Text, ev.Output = append(out.Text, c.text...), true
	case c.hasChoices || c.hasUsage:
		// a usage-only chunk
	case len(c.typ) > 0:
		ev.WrongAPI = foreign(c.typ)
		ev.Unknown = ev.WrongAPI == ""
	default:
		ev.Unknown = true
	}
}

// foreign names the API an event of another "type" belongs to.
func foreign(typ []byte) api.Name {
	if len(typ) > 9 && string(typ[:9]) == "response." {
		return api.Responses
	}
	switch string(typ) {
	case "message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta", "content_block_stop", "ping":
		return api.Messages
	}
	return ""
}

// The "object" values the decoder tells apart.
const (
	objOther = iota
	objChat  // chat.completion.chunk or chat.completion: a chat answer
)

// chunk is what one event's JSON says; strings are decoded into its
// scratch buffers, which grow once.
type chunk struct {
	out        *api.Out
	ev         *api.Event
	typ        []byte // the top-level "type"
	delta      []byte // OpenAI's delta
	text       []byte // the top-level "text" (done event, body)
	hasText    bool
	choices    int
	hasChoices bool
	hasUsage   bool
	object     int
	scratch    []byte
	isError    bool
	errMsg     []byte
	errType    []byte
}

func (c *chunk) reset(out *api.Out, ev *api.Event) {
	c.out, c.ev = out, ev
	c.typ, c.delta, c.text, c.errMsg, c.errType = c.typ[:0], c.delta[:0], c.text[:0], c.errMsg[:0], c.errType[:0]
	c.hasText, c.choices, c.hasChoices, c.hasUsage, c.object, c.isError = false, 0, false, false, objOther, false
}

func chunkField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "type":
		return str(b, i, depth, &c.typ)
	case "delta":
		return str(b, i, depth, &c.delta)
	case "text":
		c.hasText = true
		return str(b, i, depth, &c.text)
	case "object":
		i = str(b, i, depth, &c.scratch)
		switch string(c.scratch) {
		case "chat.completion.chunk", "chat.completion":
			c.object = objChat
		case "error":
			c.isError = true
		}
		return i
	case "message": // vLLM's older error shape
		return str(b, i, depth, &c.errMsg)
	case "choices":
		c.hasChoices = true
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '[' {
			return js.WalkArray(b, i, depth+1, c, choiceElem)
		}
	case "usage":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			c.hasUsage = true
			return js.WalkObject(b, i, depth+1, c, usageField)
		}
	case "error":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == 'n' {
			return js.Literal(b, i, "null")
		}
		c.isError = true
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, errorField)
		}
		if i < len(b) && b[i] == '"' {
			return str(b, i, depth, &c.errMsg)
		}
	}
	return js.SkipValue(b, i, depth)
}

// str decodes a string value into *dst (replacing it); another type is
// skipped and leaves *dst empty.
func str(b []byte, i, depth int, dst *[]byte) int {
	i = js.SkipWS(b, i)
	if i < len(b) && b[i] == '"' {
		i, *dst = js.AppendString(b, i, (*dst)[:0])
		return i
	}
	*dst = (*dst)[:0]
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
	if string(key) == "delta" {
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, deltaField)
		}
	}
	return js.SkipValue(b, i, depth)
}

func deltaField(c *chunk, key, b []byte, i, depth int) int {
	if string(key) == "content" {
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '"' {
			i, c.out.Text = js.AppendString(b, i, c.out.Text)
			return i
		}
	}
	return js.SkipValue(b, i, depth)
}

func usageField(c *chunk, key, b []byte, i, depth int) int {
	u := &c.ev.Usage
	switch string(key) {
	case "prompt_tokens", "input_tokens":
		i, u.Prompt = js.ReadInt(b, i)
		return i
	case "completion_tokens", "output_tokens":
		i, u.Completion = js.ReadInt(b, i)
		return i
	}
	return js.SkipValue(b, i, depth)
}

func errorField(c *chunk, key, b []byte, i, depth int) int {
	switch string(key) {
	case "message":
		return str(b, i, depth, &c.errMsg)
	case "type", "code":
		if len(c.errType) == 0 {
			return str(b, i, depth, &c.errType)
		}
	}
	return js.SkipValue(b, i, depth)
}
