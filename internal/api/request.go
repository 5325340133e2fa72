package api

import (
	"encoding/json"
	"strconv"

	"github.com/tracekit/tracekit/internal/api/jsonscan"
)

// Request is what a request encoder needs besides the messages: the
// fields of one request that are not its conversation. Each API's package
// appends a body of its own shape from it (AppendRequest).
type Request struct {
	Model string
	// MaxTokens is the output token limit, 0 for none (Messages, which
	// requires one, then sends DefaultMaxTokens).
	MaxTokens int32
	// NonStreaming asks a generating API for one body rather than a
	// stream.
	NonStreaming bool
	// Tools and ToolChoice are the turn's chat-shaped "tools" and
	// "tool_choice" JSON texts ("" when unset); each API rewrites them
	// into its own shape.
	Tools, ToolChoice string
	Temperature       *float64
	IgnoreEOS         bool
	// ReasoningEffort is low, medium or high ("" unset): Responses'
	// reasoning.effort, chat's reasoning_effort.
	ReasoningEffort string
	// ThinkingBudget is Messages' thinking.budget_tokens (0: no thinking
	// field).
	ThinkingBudget int
	// PreviousResponseID chains a Responses request to the answer it
	// follows (server-side history): only the new items are sent.
	PreviousResponseID string
	// Extra is the inside of the run's --extra-body object ("k":v,...),
	// appended last so its fields override tracekit's own.
	Extra []byte
}

// DefaultMaxTokens is the max_tokens a Messages request carries when the
// turn sets none: the API requires the field.
const DefaultMaxTokens = 4096

// AppendCommon appends the optional fields every generating API shares
// under the same names: temperature, ignore_eos (vLLM's), then the extra
// body. Each starts with a ",".
func (r *Request) AppendCommon(dst []byte) []byte {
	if r.IgnoreEOS {
		dst = append(dst, `,"ignore_eos":true`...)
	}
	if r.Temperature != nil {
		dst = append(dst, `,"temperature":`...)
		dst = strconv.AppendFloat(dst, *r.Temperature, 'g', -1, 64)
	}
	return r.AppendExtra(dst)
}

// AppendExtra appends the extra body after a ",", if any.
func (r *Request) AppendExtra(dst []byte) []byte {
	if len(r.Extra) > 0 {
		dst = append(dst, ',')
		dst = append(dst, r.Extra...)
	}
	return dst
}

// Tool is one function tool of a chat-shaped "tools" array.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ParseTools reads a chat-shaped "tools" JSON text ([{"type":"function",
// "function":{name, description, parameters}}]) into its function tools;
// other entries are skipped.
func ParseTools(tools string) ([]Tool, error) {
	var in []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(tools), &in); err != nil {
		return nil, err
	}
	out := make([]Tool, 0, len(in))
	for _, t := range in {
		if t.Type != "" && t.Type != "function" {
			continue
		}
		out = append(out, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return out, nil
}

// ToolChoice is a chat-shaped "tool_choice" read: Mode is auto, none or
// required, or "function" with Name the function forced.
type ToolChoice struct {
	Mode, Name string
}

// ParseToolChoice reads a chat-shaped "tool_choice" JSON text ("\"auto\"",
// "\"none\"", "\"required\"" or {"type":"function","function":{"name":x}}).
func ParseToolChoice(choice string) (ToolChoice, error) {
	var s string
	if err := json.Unmarshal([]byte(choice), &s); err == nil {
		return ToolChoice{Mode: s}, nil
	}
	var o struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(choice), &o); err != nil {
		return ToolChoice{}, err
	}
	name := o.Function.Name
	if name == "" {
		name = o.Name
	}
	return ToolChoice{Mode: "function", Name: name}, nil
}

// AppendString appends s as a JSON string literal.
func AppendString(dst []byte, s string) []byte { return jsonscan.AppendQuoted(dst, s) }
