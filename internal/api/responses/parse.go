package responses

import (
	"encoding/json"
	"errors"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/chatmsg"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads a /v1/responses request body (the inverse of
// AppendRequest): instructions as a system message first, then the input
// (a string is one user message; items in order: messages, function_call
// items as the tool calls of the assistant message before them,
// function_call_output items as tool messages; a message's input_image
// parts as its media (api.ReadDataURI); reasoning items, which
// replay does not send back, are dropped), max_output_tokens, stream,
// previous_response_id, and tools and tool_choice rewritten into chat's
// shape.
func ParseRequest(body []byte) (*api.Call, error) {
	var req struct {
		Model        string          `json:"model"`
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
		ToolChoice         json.RawMessage `json:"tool_choice"`
		MaxOutputTokens    *int32          `json:"max_output_tokens"`
		Stream             bool            `json:"stream"`
		PreviousResponseID string          `json:"previous_response_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	c := &api.Call{Model: req.Model, Conversation: true, Stream: req.Stream, PreviousResponseID: req.PreviousResponseID}
	if req.MaxOutputTokens != nil {
		c.MaxTokens = *req.MaxOutputTokens
	}
	if req.Instructions != "" {
		c.Messages = append(c.Messages, trace.Message{Role: "system", Content: req.Instructions})
	}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		c.Messages = append(c.Messages, trace.Message{Role: "user", Content: s})
	} else if len(req.Input) > 0 && string(req.Input) != "null" {
		var items []struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Output    json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return nil, err
		}
		for _, it := range items {
			switch it.Type {
			case "", "message":
				text, _ := chatmsg.ContentText(it.Content)
				msg := trace.Message{Role: it.Role, Content: text}
				imagesOf(c, &msg, it.Content)
				c.Messages = append(c.Messages, msg)
			case "function_call":
				call := trace.ToolCall{ID: it.CallID, Name: it.Name, Arguments: chatmsg.ArgumentsText(it.Arguments)}
				if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == "assistant" {
					c.Messages[n-1].ToolCalls = append(c.Messages[n-1].ToolCalls, call)
				} else {
					c.Messages = append(c.Messages, trace.Message{Role: "assistant", ToolCalls: []trace.ToolCall{call}})
				}
			case "function_call_output":
				c.Messages = append(c.Messages, trace.Message{Role: "tool", ToolCallID: it.CallID, Content: chatmsg.ArgumentsText(it.Output)})
			}
		}
	}
	var tools []api.Tool
	for _, t := range req.Tools {
		if t.Type == "function" || t.Type == "" {
			tools = append(tools, api.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	c.Tools = api.ChatTools(tools)
	c.ToolChoice = parseToolChoice(req.ToolChoice)
	return c, nil
}

// imagesOf keeps the images of a message item's content parts in msg,
// in order: input_image parts, whose image_url is a data URI (one by URL,
// or a file_id, is counted in c.SkippedMedia).
func imagesOf(c *api.Call, msg *trace.Message, content json.RawMessage) {
	if len(content) == 0 || content[0] != '[' {
		return
	}
	var parts []struct {
		Type     string `json:"type"`
		ImageURL string `json:"image_url"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return
	}
	for _, p := range parts {
		if p.Type != "input_image" {
			continue
		}
		if p.ImageURL == "" {
			c.KeepMedia(msg, p.Type, trace.Media{}, errors.New("no image_url (an uploaded file_id): the request holds no bytes to record"))
			continue
		}
		it, err := api.ReadDataURI(p.ImageURL)
		c.KeepMedia(msg, p.Type, it, err)
	}
}

// parseToolChoice rewrites a Responses tool_choice ("auto", "none",
// "required", or {"type":"function","name":x}) into chat's shape.
func parseToolChoice(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		return api.ChatToolChoice(api.ToolChoice{Mode: mode})
	}
	var o struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &o) != nil || o.Name == "" {
		return api.CompactJSON(raw)
	}
	return api.ChatToolChoice(api.ToolChoice{Mode: "function", Name: o.Name})
}
