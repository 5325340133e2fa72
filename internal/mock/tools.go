package mock

import (
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/api"
)

// ToolCallsHeader asks for an answer of N tool calls (0 a text answer),
// whatever the request's tool_choice says; ToolNamesHeader names them
// ("a,b,c", in order; alone it also gives N). Replay sends both with
// --mock-hints: the count and names its trace recorded. See the package
// doc.
const (
	ToolCallsHeader = "X-Tracekit-Tool-Calls"
	ToolNamesHeader = "X-Tracekit-Tool-Names"
)

// maxHeaderToolCalls bounds ToolCallsHeader.
const maxHeaderToolCalls = 64

// toolPlan decides the tool calls of an answer: N from the count header
// (or the names header's count), else one when tool_choice is "required"
// (Messages: "any") or names a function, else none. names are the calls'
// function names: the names header's, the named function, or the
// request's tools in turn ("tool" when it has none).
func (x *exchange) toolPlan(header, namesHeader string) (n int, names []string, err error) {
	req := x.req
	n, forced, tools := req.toolCalls, req.toolForced, req.tools
	if n > 0 && len(tools) == 0 {
		return 0, nil, invalid("tool_choice", "When using `tool_choice`, `tools` must be set.")
	}
	if header != "" {
		h, err := strconv.Atoi(strings.TrimSpace(header))
		if err != nil || h < 0 || h > maxHeaderToolCalls {
			return 0, nil, invalid("", "%s %q: expected a number of tool calls from 0 to %d", ToolCallsHeader, header, maxHeaderToolCalls)
		}
		n = h
	}
	if namesHeader = strings.TrimSpace(namesHeader); namesHeader != "" {
		given := strings.Split(namesHeader, ",")
		for i, name := range given {
			if given[i] = strings.TrimSpace(name); given[i] == "" {
				return 0, nil, invalid("", "%s %q: name %d is empty (expected function names separated by commas)", ToolNamesHeader, namesHeader, i+1)
			}
		}
		switch {
		case len(given) > maxHeaderToolCalls:
			return 0, nil, invalid("", "%s: %d names, at most %d", ToolNamesHeader, len(given), maxHeaderToolCalls)
		case header != "" && n != len(given):
			return 0, nil, invalid("", "%s %q names %d calls, %s asks for %d", ToolNamesHeader, namesHeader, len(given), ToolCallsHeader, n)
		}
		return len(given), given, nil
	}
	for i := range n {
		switch {
		case forced != "":
			names = append(names, forced)
		case len(tools) > 0:
			names = append(names, tools[i%len(tools)])
		default:
			names = append(names, "tool")
		}
	}
	return n, names, nil
}

// toolID is the id of call k, unique per request as vLLM's are, with the
// API's prefix.
func (x *exchange) toolID(k int) string {
	prefix := "chatcmpl-tool-"
	switch x.api {
	case api.Responses:
		prefix = "call_"
	case api.Messages:
		prefix = "toolu_"
	}
	return prefix + x.e.RequestID + "-" + strconv.Itoa(k)
}

// toolSpan is the output tokens [from, to) of call k: the answer's tokens
// (those after the reasoning) split evenly over the calls, every call at
// least one token.
func (x *exchange) toolSpan(k int) (from, to int) {
	r := x.reasoning
	n, c := int(x.e.CompletionTokens)-r, len(x.toolNames)
	return r + k*n/c, r + (k+1)*n/c
}

// callAt is the call whose span holds output token tok.
func (x *exchange) callAt(tok int) int {
	for k := range x.toolNames {
		if _, to := x.toolSpan(k); tok < to {
			return k
		}
	}
	return len(x.toolNames) - 1
}

// appendToolArgs appends the argument text of call k's tokens [from, to):
// {"text": "w1 w2 ..."} with the opening on its first token and the
// closing on its last; the encoder escapes it into its event.
func (x *exchange) appendToolArgs(b []byte, k, from, to int) []byte {
	cf, ct := x.toolSpan(k)
	from, to = max(from, cf), min(to, ct)
	if from == cf {
		b = append(b, `{"text": "`...)
	}
	for i := from; i < to; i++ {
		if i > cf {
			b = append(b, ' ')
		}
		b = append(b, word(x.s.cfg.Seed, x.p.hash, i-x.reasoning)...)
	}
	if to == ct {
		b = append(b, `"}`...)
	}
	return b
}
