package mock

import (
	"encoding/json"
	"strconv"
	"strings"
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

// apiTool is one entry of a request's "tools".
type apiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// toolPlan decides the tool calls of a chat answer: N from the count
// header (or the names header's count), else one when tool_choice is
// "required" or names a function, else none. names are the calls' function
// names: the names header's, the named function, or the request's tools
// in turn ("tool" when it has none).
func (x *exchange) toolPlan(header, namesHeader string) (n int, names []string, err error) {
	req := x.req
	var tools []apiTool
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			return 0, nil, invalid("tools", "tools: expected an array of {\"type\":\"function\",\"function\":{\"name\":...}}: %v", err)
		}
	}
	var forced string
	choice := strings.TrimSpace(string(req.ToolChoice))
	switch {
	case choice == "" || choice == "null" || choice == `"auto"` || choice == `"none"`:
	case choice == `"required"`:
		n = 1
	case strings.HasPrefix(choice, "{"):
		var c apiTool
		if err := json.Unmarshal(req.ToolChoice, &c); err != nil || c.Function.Name == "" {
			return 0, nil, invalid("tool_choice", "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}")
		}
		n, forced = 1, c.Function.Name
	default:
		return 0, nil, invalid("tool_choice", "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}")
	}
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
			names = append(names, tools[i%len(tools)].Function.Name)
		default:
			names = append(names, "tool")
		}
	}
	return n, names, nil
}

// toolID is the id of call k, unique per request as vLLM's are.
func (x *exchange) toolID(k int) string {
	return "chatcmpl-tool-" + x.e.RequestID + "-" + strconv.Itoa(k)
}

// toolSpan is the output tokens [from, to) of call k: the planned output
// split evenly over the calls, every call at least one token.
func (x *exchange) toolSpan(k int) (from, to int) {
	n, c := int(x.e.CompletionTokens), len(x.toolNames)
	return k * n / c, (k + 1) * n / c
}

// appendToolArgs appends the escaped (JSON inside a JSON string) argument
// text of call k's tokens [from, to): {"text": "w1 w2 ..."} with the opening
// on its first token and the closing on its last.
func (x *exchange) appendToolArgs(b []byte, k, from, to int) []byte {
	cf, ct := x.toolSpan(k)
	from, to = max(from, cf), min(to, ct)
	if from == cf {
		b = append(b, `{\"text\": \"`...)
	}
	for i := from; i < to; i++ {
		if i > cf {
			b = append(b, ' ')
		}
		b = append(b, word(x.s.cfg.Seed, x.p.hash, i)...)
	}
	if to == ct {
		b = append(b, `\"}`...)
	}
	return b
}

// appendToolDelta appends the delta of a stream event carrying output
// tokens [from, to) of a tool-call answer: one fragment per call the
// tokens touch, vLLM's way: the first fragment of a call carries its id,
// type and name, every one a piece of the arguments.
func (x *exchange) appendToolDelta(b []byte, from, to int) []byte {
	b = append(b, `"delta":{"tool_calls":[`...)
	first := true
	for k := range x.toolNames {
		cf, ct := x.toolSpan(k)
		if ct <= from || cf >= to {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '{')
		if from <= cf {
			b = append(b, `"id":"`...)
			b = append(b, x.toolID(k)...)
			b = append(b, `","type":"function",`...)
		}
		b = append(b, `"index":`...)
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, `,"function":{`...)
		if from <= cf {
			b = append(b, `"name":`...)
			b = jsonString(b, x.toolNames[k])
			b = append(b, ',')
		}
		b = append(b, `"arguments":"`...)
		b = append(x.appendToolArgs(b, k, from, to), `"}}`...)
	}
	return append(b, "]}"...)
}

// unaryToolCalls is message.tool_calls of a non-streaming answer.
func (x *exchange) unaryToolCalls() []any {
	calls := make([]any, 0, len(x.toolNames))
	for k, name := range x.toolNames {
		cf, ct := x.toolSpan(k)
		args := []byte(`{"text": "`)
		for i := cf; i < ct; i++ {
			if i > cf {
				args = append(args, ' ')
			}
			args = append(args, word(x.s.cfg.Seed, x.p.hash, i)...)
		}
		args = append(args, `"}`...)
		calls = append(calls, map[string]any{"id": x.toolID(k), "type": "function",
			"function": map[string]any{"name": name, "arguments": string(args)}})
	}
	return calls
}
