package chat

import (
	"encoding/json"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/chatmsg"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads a /v1/chat/completions request body (the inverse of
// AppendRequest): its messages as they are (a content of another shape
// records as no text), max_completion_tokens or else max_tokens, stream,
// tools and tool_choice as compact JSON text.
func ParseRequest(body []byte) (*api.Call, error) {
	var req struct {
		Model               string            `json:"model"`
		Messages            []chatmsg.Message `json:"messages"`
		Tools               json.RawMessage   `json:"tools"`
		ToolChoice          json.RawMessage   `json:"tool_choice"`
		MaxTokens           *int32            `json:"max_tokens"`
		MaxCompletionTokens *int32            `json:"max_completion_tokens"`
		Stream              bool              `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	c := &api.Call{Model: req.Model, Conversation: true, Stream: req.Stream,
		Tools: api.CompactJSON(req.Tools), ToolChoice: api.CompactJSON(req.ToolChoice)}
	switch {
	case req.MaxCompletionTokens != nil:
		c.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.MaxTokens = *req.MaxTokens
	}
	c.Messages = make([]trace.Message, 0, len(req.Messages))
	for i := range req.Messages {
		msg, _ := req.Messages[i].Decode()
		c.Messages = append(c.Messages, msg)
	}
	return c, nil
}
