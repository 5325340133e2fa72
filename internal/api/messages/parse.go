package messages

import (
	"encoding/json"
	"errors"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/chatmsg"
	"github.com/tracekit/tracekit/trace"
)

// block is one content block of a Messages request.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Source    *struct {
		Type string `json:"type"`
		Data string `json:"data"`
	} `json:"source"`
}

// ParseRequest reads a /v1/messages request body (the inverse of
// AppendRequest): "system" (a string or text blocks) as a system message
// first, then each message's content blocks in order: a user text block
// is a user message, a tool_result block a tool message; an assistant's
// text block starts an assistant message and its tool_use blocks are that
// message's tool calls (their input as the arguments' JSON text);
// image blocks (base64 sources; one by URL is counted in
// c.SkippedMedia) are the media of the message of the text block before
// them; thinking blocks, which replay does not send back, are dropped. Also
// max_tokens, stream, and tools and tool_choice rewritten into chat's
// shape.
func ParseRequest(body []byte) (*api.Call, error) {
	var req struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		ToolChoice *struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tool_choice"`
		MaxTokens *int32 `json:"max_tokens"`
		Stream    bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	c := &api.Call{Model: req.Model, Conversation: true, Stream: req.Stream}
	if req.MaxTokens != nil {
		c.MaxTokens = *req.MaxTokens
	}
	if sys, _ := chatmsg.ContentText(req.System); sys != "" {
		c.Messages = append(c.Messages, trace.Message{Role: "system", Content: sys})
	}
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			c.Messages = append(c.Messages, trace.Message{Role: m.Role, Content: s})
			continue
		}
		var blocks []block
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, err
		}
		open := false // an assistant message of this message is open for tool_use blocks
		own := -1     // the message of this message's last text block, for its images
		for _, b := range blocks {
			switch b.Type {
			case "text":
				c.Messages = append(c.Messages, trace.Message{Role: m.Role, Content: b.Text})
				open = m.Role == "assistant"
				own = len(c.Messages) - 1
			case "tool_use":
				call := trace.ToolCall{ID: b.ID, Name: b.Name, Arguments: api.CompactJSON(b.Input)}
				if !open {
					c.Messages = append(c.Messages, trace.Message{Role: "assistant"})
					open = true
				}
				last := &c.Messages[len(c.Messages)-1]
				last.ToolCalls = append(last.ToolCalls, call)
			case "image":
				// an image belongs to the message of the text before it,
				// as the encoder writes a message's images after its text
				if own < 0 {
					c.Messages = append(c.Messages, trace.Message{Role: m.Role})
					own = len(c.Messages) - 1
				}
				msg := &c.Messages[own]
				switch {
				case b.Source == nil:
					c.KeepMedia(msg, "image", trace.Media{}, errors.New("no source"))
				case b.Source.Type != "base64":
					c.KeepMedia(msg, "image", trace.Media{}, api.ErrRemoteMedia)
				default:
					it, err := api.ReadBase64(b.Source.Data)
					c.KeepMedia(msg, "image", it, err)
				}
			case "tool_result":
				text, _ := chatmsg.ContentText(b.Content)
				c.Messages = append(c.Messages, trace.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
				open, own = false, -1
			}
		}
	}
	tools := make([]api.Tool, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, api.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	c.Tools = api.ChatTools(tools)
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "tool":
			c.ToolChoice = api.ChatToolChoice(api.ToolChoice{Mode: "function", Name: tc.Name})
		case "any":
			c.ToolChoice = api.ChatToolChoice(api.ToolChoice{Mode: "required"})
		case "none", "auto":
			c.ToolChoice = api.ChatToolChoice(api.ToolChoice{Mode: tc.Type})
		}
	}
	return c, nil
}
