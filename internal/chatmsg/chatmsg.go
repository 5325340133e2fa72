// Package chatmsg decodes OpenAI chat messages as request bodies and agent
// traces carry them: {"role", "content", "tool_calls", "tool_call_id"},
// content a string, null or a list of parts, tool-call arguments a JSON
// string (or, from some clients, an object). In: the JSON of one message
// (Message, usually inside a caller's own struct); out: a trace.Message
// with the content flattened to its text and arguments as the API's text.
// capture (request bodies) and synth's OTel import (span messages, which
// add the GenAI conventions' parts) share it.
package chatmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// Message is one chat message on the wire.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// ToolCall is one entry of an assistant message's "tool_calls".
type ToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ErrContent is returned for a content that is neither a string, null nor
// a list of parts.
var ErrContent = errors.New("want a string or a list of text parts")

// Decode is m as a trace.Message: role and tool_call_id as they are,
// content flattened (ContentText), each tool call's arguments as text
// (ArgumentsText). A content ContentText refuses gives the message with no
// text and the error, so a lenient caller can keep the rest.
func (m *Message) Decode() (trace.Message, error) {
	text, err := ContentText(m.Content)
	out := trace.Message{Role: m.Role, Content: text, ToolCallID: m.ToolCallID}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, trace.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: ArgumentsText(c.Function.Arguments)})
	}
	return out, err
}

// ContentText flattens a content: "" for absent or null, a string's value,
// or a list's parts joined: a string part as it is (a completions prompt
// list too), an object part's "text", else its own "content" flattened;
// other parts (images, token ids) add nothing. Anything else is
// ErrContent.
func ContentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", ErrContent
	}
	var b strings.Builder
	for _, part := range parts {
		var ps string // fresh per part: null leaves a string untouched
		var p struct {
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		switch {
		case json.Unmarshal(part, &ps) == nil:
			b.WriteString(ps)
		case json.Unmarshal(part, &p) != nil:
		case p.Text != "":
			b.WriteString(p.Text)
		default:
			t, _ := ContentText(p.Content)
			b.WriteString(t)
		}
	}
	return b.String(), nil
}

// ArgumentsText is a tool call's arguments (or a tool's result) as the
// OpenAI API carries them: "" for absent or null, a JSON string's value,
// other JSON (an object some clients send) compacted.
func ArgumentsText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return string(raw)
	}
	return c.String()
}
