package record

import "github.com/tracekit/tracekit/trace"

// Tool calls of an answer (OpenAI function calling), as vLLM streams them:
// choices[0].delta.tool_calls is an array of fragments
// {"index":k,"id":...,"type":"function","function":{"name":...,"arguments":...}}
// where the first fragment of index k carries its id and name and every
// fragment a piece of its arguments, concatenated in arrival order; the
// last chunk's finish_reason is "tool_calls". A non-streaming body has
// message.tool_calls, whole calls without "index" (their position is
// their index). Fragments fill reused buffers: nothing is allocated once
// they have grown, and a content-only answer never touches this state.

// maxToolCalls bounds the index a fragment may name, so a hostile server
// cannot make the parser grow a slice without end.
const maxToolCalls = 1024

// toolCallBuf is one call being assembled.
type toolCallBuf struct {
	id, name, args []byte
}

// toolCalls is a Stream's tool-call state.
type toolCalls struct {
	calls  []toolCallBuf // by index; the first n are in use
	n      int
	all    []byte  // every argument fragment, in arrival order
	evIdx  []int32 // events (indices into Stream.evNs) that carried argument text
	evEnd  []int32 // end offset in all after that event
	finish bool    // a finish_reason "tool_calls" was seen

	// The fragment being parsed: its members may come in any order (vLLM
	// puts "id" before "index"), so they wait here until its object ends.
	frag     toolCallBuf
	fragIdx  int64
	fragPos  int // position of the fragment in its array
	fragHasA bool
}

func (t *toolCalls) reset() {
	for i := range t.calls[:t.n] {
		c := &t.calls[i]
		c.id, c.name, c.args = c.id[:0], c.name[:0], c.args[:0]
	}
	t.n, t.all, t.evIdx, t.evEnd, t.finish = 0, t.all[:0], t.evIdx[:0], t.evEnd[:0], false
}

// toolCallsValue parses a delta's or message's "tool_calls" value.
func toolCallsValue(c *chunk, b []byte, i, depth int) int {
	i = skipWS(b, i)
	if i < len(b) && b[i] == 'n' {
		return literal(b, i, "null")
	}
	c.s.tools.fragPos = 0
	return walkArray(b, i, depth+1, c, toolCallElem)
}

func toolCallElem(c *chunk, b []byte, i, depth int) int {
	t := &c.s.tools
	pos := t.fragPos
	t.fragPos++
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return skipValue(b, i, depth)
	}
	f := &t.frag
	f.id, f.name, f.args, t.fragIdx, t.fragHasA = f.id[:0], f.name[:0], f.args[:0], -1, false
	i = walkObject(b, i, depth+1, c, toolCallField)
	if i < 0 {
		return i
	}
	idx := t.fragIdx
	if idx < 0 {
		idx = int64(pos) // non-streaming: whole calls in order
	}
	if idx >= maxToolCalls {
		c.s.fail(trace.ErrMalformed, "tool call index beyond the parser's bound")
		return i
	}
	t.commit(c.s, int(idx))
	return i
}

func toolCallField(c *chunk, key, b []byte, i, depth int) int {
	f := &c.s.tools.frag
	switch string(key) {
	case "index":
		i, c.s.tools.fragIdx = readInt(b, i)
		return i
	case "id":
		return textValue(b, i, depth, &f.id)
	case "function":
		i = skipWS(b, i)
		if i < len(b) && b[i] == '{' {
			return walkObject(b, i, depth+1, c, toolFunctionField)
		}
	}
	return skipValue(b, i, depth)
}

func toolFunctionField(c *chunk, key, b []byte, i, depth int) int {
	t := &c.s.tools
	switch string(key) {
	case "name":
		return textValue(b, i, depth, &t.frag.name)
	case "arguments":
		t.fragHasA = true
		return textValue(b, i, depth, &t.frag.args)
	}
	return skipValue(b, i, depth)
}

// commit adds the parsed fragment to call idx: the id and name the first
// time they come, the arguments appended.
func (t *toolCalls) commit(s *Stream, idx int) {
	for t.n <= idx {
		if t.n == len(t.calls) {
			t.calls = append(t.calls, toolCallBuf{})
		}
		c := &t.calls[t.n]
		c.id, c.name, c.args = c.id[:0], c.name[:0], c.args[:0]
		t.n++
	}
	c, f := &t.calls[idx], &t.frag
	if len(c.id) == 0 {
		c.id = append(c.id, f.id...)
	}
	if len(c.name) == 0 {
		c.name = append(c.name, f.name...)
	}
	if len(f.args) == 0 {
		return
	}
	c.args = append(c.args, f.args...)
	t.all = append(t.all, f.args...)
	ev := int32(len(s.evNs)) // this chunk's event, listed after the parse
	if k := len(t.evIdx); k > 0 && t.evIdx[k-1] == ev {
		t.evEnd[k-1] = int32(len(t.all))
		return
	}
	t.evIdx, t.evEnd = append(t.evIdx, ev), append(t.evEnd, int32(len(t.all)))
}

// finishReason reads a choice's "finish_reason", noting "tool_calls".
func finishReason(c *chunk, b []byte, i, depth int) int {
	i = skipWS(b, i)
	if i < len(b) && b[i] == 'n' { // every chunk but the last: no skipValue call
		return literal(b, i, "null")
	}
	const tc = `"tool_calls"`
	if len(b)-i >= len(tc) && string(b[i:i+len(tc)]) == tc {
		c.s.tools.finish = true
		return i + len(tc)
	}
	return skipValue(b, i, depth)
}

// addTokens adds the tokens of each event's argument text to counted
// per-event tokens (tokens without the server's continuous usage).
func (t *toolCalls) addTokens(s *Stream, tokens []int32) {
	start := int32(0)
	for k, ev := range t.evIdx {
		end := t.evEnd[k]
		if int(ev) < len(tokens) {
			tokens[ev] += int32(s.count(t.all[start:end]))
		}
		start = end
	}
}

// ToolCalls is the number of tool calls in the answer so far.
func (s *Stream) ToolCalls() int { return s.tools.n }

// ToolCallsFinish reports whether the answer ended with finish_reason
// "tool_calls".
func (s *Stream) ToolCallsFinish() bool { return s.tools.finish }

// AppendToolCalls appends the answer's tool calls (index order) to dst as
// trace.ToolCalls; it allocates their strings, so it is for the answers
// replay carries into a later request, not for the hot path.
func (s *Stream) AppendToolCalls(dst []trace.ToolCall) []trace.ToolCall {
	for i := range s.tools.calls[:s.tools.n] {
		c := &s.tools.calls[i]
		dst = append(dst, trace.ToolCall{ID: string(c.id), Name: string(c.name), Arguments: string(c.args)})
	}
	return dst
}

// ToolCallNameIs reports whether call k of the answer names function name
// (no allocation).
func (s *Stream) ToolCallNameIs(k int, name string) bool {
	return k < s.tools.n && string(s.tools.calls[k].name) == name
}
