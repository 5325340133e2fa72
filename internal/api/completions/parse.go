package completions

import (
	"encoding/json"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/chatmsg"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads a /v1/completions request body: its prompt as one
// user message (a list of prompts joined), max_tokens, stream. A body
// with chat "messages" instead (some clients send it here) reads as chat.
func ParseRequest(body []byte) (*api.Call, error) {
	var req struct {
		Model      string            `json:"model"`
		Prompt     json.RawMessage   `json:"prompt"`
		Messages   []chatmsg.Message `json:"messages"`
		Tools      json.RawMessage   `json:"tools"`
		ToolChoice json.RawMessage   `json:"tool_choice"`
		MaxTokens  *int32            `json:"max_tokens"`
		Stream     bool              `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	c := &api.Call{Model: req.Model, Stream: req.Stream,
		Tools: api.CompactJSON(req.Tools), ToolChoice: api.CompactJSON(req.ToolChoice)}
	if req.MaxTokens != nil {
		c.MaxTokens = *req.MaxTokens
	}
	if req.Messages != nil {
		c.Conversation = true
		for i := range req.Messages {
			msg, _ := req.Messages[i].Decode()
			c.Messages = append(c.Messages, msg)
		}
		return c, nil
	}
	prompt, _ := chatmsg.ContentText(req.Prompt)
	c.Messages = []trace.Message{{Role: "user", Content: prompt}}
	return c, nil
}
