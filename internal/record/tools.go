package record

import "github.com/tracekit/tracekit/trace"

// The answer's tool calls, whatever API carried them: the decoder
// assembles them (api.ToolCalls), the Stream counts their argument text as
// the tokens of the events that carried it.

// addToolTokens adds the tokens of each event's argument text to counted
// per-event tokens (tokens without the server's continuous usage).
func (s *Stream) addToolTokens(tokens []int32) {
	evs, ends, all := s.out.Tools.ArgEvents()
	start := int32(0)
	for k, ev := range evs {
		end := ends[k]
		if int(ev) < len(tokens) {
			tokens[ev] += int32(s.count(all[start:end]))
		}
		start = end
	}
}

// ToolCalls is the number of tool calls in the answer so far.
func (s *Stream) ToolCalls() int { return s.out.Tools.Len() }

// ToolCallsFinish reports whether the answer ended by calling tools (chat:
// finish_reason "tool_calls"; Messages: stop_reason "tool_use";
// Responses: a completed answer with function calls).
func (s *Stream) ToolCallsFinish() bool { return s.out.Tools.Finished }

// AppendToolCalls appends the answer's tool calls (index order) to dst as
// trace.ToolCalls; it allocates their strings, so it is for the answers
// replay carries into a later request, not for the hot path.
func (s *Stream) AppendToolCalls(dst []trace.ToolCall) []trace.ToolCall {
	return s.out.Tools.Append(dst)
}

// ToolCallNameIs reports whether call k of the answer names function name
// (no allocation).
func (s *Stream) ToolCallNameIs(k int, name string) bool {
	if k >= s.out.Tools.Len() {
		return false
	}
	_, n, _ := s.out.Tools.Call(k)
	return string(n) == name
}
