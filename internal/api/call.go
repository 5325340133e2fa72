package api

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tracekit/tracekit/trace"
)

// Call is what a request body says, in the form a trace turn stores it:
// the inverse of an API's AppendRequest. capture parses each recorded
// request into one (the API's ParseRequest, apis.Spec.ParseRequest).
type Call struct {
	Model string
	// Messages are the request's messages in trace form: the whole history
	// a generating API's request carries (system first), or an embeddings
	// batch (trace.RoleInput) or a query and its documents
	// (trace.RoleQuery, trace.RoleDocument).
	Messages []trace.Message
	// Conversation: Messages are a conversation's history, which capture
	// matches against earlier answers (chat, Responses, Messages).
	Conversation bool
	// MaxTokens is the output token limit, 0 when the request sets none.
	MaxTokens int32
	// Stream is the request's "stream": true; absent or false asks for one
	// JSON body, every API's default.
	Stream bool
	// Tools and ToolChoice are the request's tools and tool choice
	// rewritten into chat's shape, as a trace stores them, "" when absent.
	Tools, ToolChoice string
	// PreviousResponseID is a Responses request's previous_response_id:
	// the server holds the history, Messages are only the new items.
	PreviousResponseID string
	// SkippedMedia says, for each media part the request carries that
	// Messages do not keep, why: an item given by URL (ErrRemoteMedia), or
	// bytes no server reads. Each names the part's type, never its URL.
	SkippedMedia []error
}

// KeepMedia appends item, read from a content part of type part, to msg's
// media; when err says it could not be read, the part is counted in
// SkippedMedia instead.
func (c *Call) KeepMedia(msg *trace.Message, part string, item trace.Media, err error) {
	if err != nil {
		c.SkippedMedia = append(c.SkippedMedia, fmt.Errorf("a %s part: %w", part, err))
		return
	}
	msg.Media = append(msg.Media, item)
}

// CompactJSON is raw as compact JSON text, "" for absent, null or
// invalid JSON.
func CompactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// ChatTool is a function tool in chat's shape, for writing a "tools"
// array back as a trace stores it.
type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ChatTools writes function tools as a chat-shaped "tools" JSON text
// (the inverse of ParseTools), "" for none.
func ChatTools(tools []Tool) string {
	if len(tools) == 0 {
		return ""
	}
	out := make([]chatTool, len(tools))
	for i, t := range tools {
		out[i] = chatTool{Type: "function", Function: chatFunction{Name: t.Name, Description: t.Description,
			Parameters: json.RawMessage(CompactJSON(t.Parameters))}}
		if len(out[i].Function.Parameters) == 0 {
			out[i].Function.Parameters = nil
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

// ChatToolChoice writes a tool choice as chat's "tool_choice" JSON text
// (the inverse of ParseToolChoice): "\"auto\"", "\"none\"",
// "\"required\"", or the function object; "" for the zero value.
func ChatToolChoice(c ToolChoice) string {
	switch {
	case c.Mode == "function":
		return string(AppendString([]byte(`{"type":"function","function":{"name":`), c.Name)) + "}}"
	case c.Mode != "":
		b, _ := json.Marshal(c.Mode)
		return string(b)
	}
	return ""
}
