package api

import "github.com/tracekit/tracekit/trace"

// MaxToolCalls bounds the index a fragment may name, so a hostile server
// cannot make a decoder grow a slice without end.
const MaxToolCalls = 1024

// FaultToolIndex is Event.Fault for a tool call index beyond MaxToolCalls.
const FaultToolIndex = "tool call index beyond the parser's bound"

// ToolCalls assembles an answer's tool calls from the fragments its events
// carry, whatever the API: the first fragment of call k brings its id and
// name, every fragment a piece of its arguments, concatenated in arrival
// order. Buffers are reused: nothing is allocated once they have grown,
// and an answer without tool calls never touches them.
type ToolCalls struct {
	calls []toolCall // by index; the first n are in use
	n     int
	all   []byte  // every argument fragment, in arrival order
	evIdx []int32 // output events that carried argument text
	evEnd []int32 // end offset in all after that event
	// Finished: the answer ended by calling tools (chat finish_reason
	// "tool_calls", Messages stop_reason "tool_use", a completed
	// Responses answer with function calls).
	Finished bool
}

type toolCall struct {
	id, name, args []byte
}

// Reset forgets the calls, keeping the buffers.
func (t *ToolCalls) Reset() {
	for i := range t.calls[:t.n] {
		c := &t.calls[i]
		c.id, c.name, c.args = c.id[:0], c.name[:0], c.args[:0]
	}
	t.n, t.all, t.evIdx, t.evEnd, t.Finished = 0, t.all[:0], t.evIdx[:0], t.evEnd[:0], false
}

// Add adds a fragment to call k (calls up to k come into being empty): id
// and name are kept the first time they are non-empty, args is appended
// and attributed to output event ev. It returns false, changing nothing,
// when k is beyond MaxToolCalls or negative.
func (t *ToolCalls) Add(k int, id, name, args []byte, ev int) bool {
	if k < 0 || k >= MaxToolCalls {
		return false
	}
	for t.n <= k {
		if t.n == len(t.calls) {
			t.calls = append(t.calls, toolCall{})
		}
		c := &t.calls[t.n]
		c.id, c.name, c.args = c.id[:0], c.name[:0], c.args[:0]
		t.n++
	}
	c := &t.calls[k]
	if len(c.id) == 0 {
		c.id = append(c.id, id...)
	}
	if len(c.name) == 0 {
		c.name = append(c.name, name...)
	}
	if len(args) == 0 {
		return true
	}
	c.args = append(c.args, args...)
	t.all = append(t.all, args...)
	e := int32(ev)
	if k := len(t.evIdx); k > 0 && t.evIdx[k-1] == e {
		t.evEnd[k-1] = int32(len(t.all))
		return true
	}
	t.evIdx, t.evEnd = append(t.evIdx, e), append(t.evEnd, int32(len(t.all)))
	return true
}

// ArgLen is the length of all argument text so far.
func (t *ToolCalls) ArgLen() int { return len(t.all) }

// Len is the number of tool calls so far.
func (t *ToolCalls) Len() int { return t.n }

// Call returns call k's id, function name and arguments: views of the
// buffers, valid until the next Add or Reset.
func (t *ToolCalls) Call(k int) (id, name, args []byte) {
	c := &t.calls[k]
	return c.id, c.name, c.args
}

// ArgEvents returns, for counting tokens per event, the output events
// that carried argument text (ev), where each one's text ends in args
// (end), and all argument text in arrival order (args): event ev[i]
// carried args[end[i-1]:end[i]].
func (t *ToolCalls) ArgEvents() (ev, end []int32, args []byte) {
	return t.evIdx, t.evEnd, t.all
}

// Append appends the calls (index order) to dst as trace.ToolCalls; it
// allocates their strings, so it is for answers carried into a later
// request, not for the hot path.
func (t *ToolCalls) Append(dst []trace.ToolCall) []trace.ToolCall {
	for i := range t.calls[:t.n] {
		c := &t.calls[i]
		dst = append(dst, trace.ToolCall{ID: string(c.id), Name: string(c.name), Arguments: string(c.args)})
	}
	return dst
}
