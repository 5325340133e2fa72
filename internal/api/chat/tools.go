package chat

import (
	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Tool calls of an answer (OpenAI function calling), as vLLM streams them:
// choices[0].delta.tool_calls is an array of fragments
// {"index":k,"id":...,"type":"function","function":{"name":...,"arguments":...}}
// where the first fragment of index k carries its id and name and every
// fragment a piece of its arguments, concatenated in arrival order; the
// last chunk's finish_reason is "tool_calls". A non-streaming body has
// message.tool_calls, whole calls without "index" (their position is
// their index). Fragments are assembled in the Out's api.ToolCalls.

// fragment is the tool-call fragment being parsed: its members may come
// in any order (vLLM puts "id" before "index"), so they wait here until
// its object ends.
type fragment struct {
	id, name, args []byte
	idx            int64
	pos            int // position of the fragment in its array
}

// toolCallsValue parses a delta's or message's "tool_calls" value.
func toolCallsValue(c *chunk, b []byte, i, depth int) int {
	i = js.SkipWS(b, i)
	if i < len(b) && b[i] == 'n' {
		return js.Literal(b, i, "null")
	}
	c.tools.pos = 0
	return js.WalkArray(b, i, depth+1, c, toolCallElem)
}

func toolCallElem(c *chunk, b []byte, i, depth int) int {
	f := &c.tools
	pos := f.pos
	f.pos++
	i = js.SkipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return js.SkipValue(b, i, depth)
	}
	f.id, f.name, f.args, f.idx = f.id[:0], f.name[:0], f.args[:0], -1
	i = js.WalkObject(b, i, depth+1, c, toolCallField)
	if i < 0 {
		return i
	}
	idx := f.idx
	if idx < 0 {
		idx = int64(pos) // non-streaming: whole calls in order
	}
	if idx >= api.MaxToolCalls || !c.out.Tools.Add(int(idx), f.id, f.name, f.args, c.out.Event) {
		if c.ev.Fault == "" {
			c.ev.Fault = api.FaultToolIndex
		}
	}
	return i
}

func toolCallField(c *chunk, key, b []byte, i, depth int) int {
	f := &c.tools
	switch string(key) {
	case "index":
		i, f.idx = js.ReadInt(b, i)
		return i
	case "id":
		return textValue(b, i, depth, &f.id)
	case "function":
		i = js.SkipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return js.WalkObject(b, i, depth+1, c, toolFunctionField)
		}
	}
	return js.SkipValue(b, i, depth)
}

func toolFunctionField(c *chunk, key, b []byte, i, depth int) int {
	f := &c.tools
	switch string(key) {
	case "name":
		return textValue(b, i, depth, &f.name)
	case "arguments":
		return textValue(b, i, depth, &f.args)
	}
	return js.SkipValue(b, i, depth)
}

// finishReason reads a choice's "finish_reason", noting "tool_calls".
func finishReason(c *chunk, b []byte, i, depth int) int {
	i = js.SkipWS(b, i)
	if i < len(b) && b[i] == 'n' { // every chunk but the last: no SkipValue call
		return js.Literal(b, i, "null")
	}
	const tc = `"tool_calls"`
	if len(b)-i >= len(tc) && string(b[i:i+len(tc)]) == tc {
		c.out.Tools.Finished = true
		return i + len(tc)
	}
	return js.SkipValue(b, i, depth)
}
