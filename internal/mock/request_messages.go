package mock

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// messagesRequest is the subset of an Anthropic Messages request body the
// mock reads.
type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream    bool `json:"stream"`
	IgnoreEOS bool `json:"ignore_eos"` // vLLM's extension, as on chat
	Thinking  *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	} `json:"thinking"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
}

// block is one content block of a Messages request.
type block struct {
	Type     string          `json:"type"`
	Source   *imageSource    `json:"source"` // image
	Text     string          `json:"text"`
	Content  json.RawMessage `json:"content"` // tool_result: a string or blocks
	Thinking string          `json:"thinking"`
}

// parseMessages decodes and validates a Messages body. The prompt is the
// system prompt (a "system" message), then each message with the text of
// its text blocks and tool_result contents joined; tool_use and thinking
// blocks add no text, as chat's tool calls and reasoning in history do
// not (a chat template drops earlier turns' reasoning), so turn k+1 hits
// the prefix cache entry of turn k's answer. vLLM tolerates system
// messages inside "messages"; so does the mock.
func parseMessages(body []byte) (*genRequest, error) {
	var req messagesRequest
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	if req.MaxTokens == nil {
		return nil, invalid("max_tokens", "max_tokens: Field required")
	}
	if err := atLeastOne("max_tokens", req.MaxTokens); err != nil {
		return nil, err
	}
	g := &genRequest{Model: req.Model, Stream: req.Stream, IgnoreEOS: req.IgnoreEOS, MaxTokens: req.MaxTokens, maxParam: "max_tokens"}
	if present(req.System) {
		text, err := blocksText(req.System)
		if err != nil {
			return nil, invalid("system", "system: %v", err)
		}
		g.msgs = append(g.msgs, Message{"system", text})
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "messages: at least one message is required")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "user", "assistant", "system":
		case "":
			return nil, invalid("messages", "messages.%d.role: Field required", i)
		default:
			return nil, invalid("messages", "messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		text, err := blocksText(m.Content)
		if err != nil {
			return nil, invalid("messages", "messages.%d.content: %v", i, err)
		}
		refs, err := blockImages(m.Content, i, len(g.msgs))
		if err != nil {
			return nil, err
		}
		g.media = append(g.media, refs...)
		g.msgs = append(g.msgs, Message{m.Role, text})
	}
	if t := req.Thinking; t != nil {
		switch t.Type {
		case "disabled":
			g.noReasoning = true
		case "enabled":
			if t.BudgetTokens == nil || *t.BudgetTokens < 1 {
				return nil, invalid("thinking", "thinking.budget_tokens: a positive integer is required when thinking is enabled")
			}
			if *t.BudgetTokens >= *req.MaxTokens {
				return nil, invalid("thinking", "max_tokens must be greater than thinking.budget_tokens")
			}
			g.budget = *t.BudgetTokens
		default:
			return nil, invalid("thinking", "thinking.type: Input should be 'enabled' or 'disabled'")
		}
	}
	for _, t := range req.Tools {
		g.tools = append(g.tools, t.Name)
	}
	if c := req.ToolChoice; c != nil {
		switch c.Type {
		case "auto", "none":
		case "any":
			g.toolCalls = 1
		case "tool":
			if c.Name == "" {
				return nil, invalid("tool_choice", "tool_choice.name: Field required for type 'tool'")
			}
			g.toolCalls, g.toolForced = 1, c.Name
		default:
			return nil, invalid("tool_choice", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
		}
	}
	return g, nil
}

// imageSource is an image block's source: base64 data with its media
// type, or a URL.
type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// blockImages reads the image blocks of a message's content, in order, as
// vLLM does: a base64 source becomes a data URI of its media type, a URL
// source the URL. msg is the index the message takes in the request's
// messages. Images inside a tool_result count with the message.
func blockImages(raw json.RawMessage, m, msg int) ([]mediaRef, error) {
	if !present(raw) || raw[0] != '[' {
		return nil, nil
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, invalidContent
	}
	var refs []mediaRef
	for j, bl := range blocks {
		where := fmt.Sprintf("messages.%d.content.%d", m, j)
		switch bl.Type {
		case "image":
			s := bl.Source
			switch {
			case s != nil && s.Type == "base64" && s.Data != "":
				mt := s.MediaType
				if mt == "" {
					mt = "image/jpeg"
				}
				refs = append(refs, mediaRef{param: "messages", msg: msg, where: where + ".source", kind: trace.MediaImage, url: "data:" + mt + ";base64," + s.Data})
			case s != nil && s.Type == "url" && s.URL != "":
				refs = append(refs, mediaRef{param: "messages", msg: msg, where: where + ".source", kind: trace.MediaImage, url: s.URL})
			default:
				return nil, invalid("messages", "%s.source: expected {\"type\": \"base64\", \"media_type\", \"data\"} or {\"type\": \"url\", \"url\"}", where)
			}
		case "tool_result":
			inner, err := blockImages(bl.Content, m, msg)
			if err != nil {
				return nil, err
			}
			refs = append(refs, inner...)
		}
	}
	return refs, nil
}

// blocksText is content given as a string or an array of blocks: the text
// of text blocks and tool_result contents, joined.
func blocksText(raw json.RawMessage) (string, error) {
	if !present(raw) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", invalidContent
	}
	var b strings.Builder
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			b.WriteString(bl.Text)
		case "tool_result":
			text, err := blocksText(bl.Content)
			if err != nil {
				return "", err
			}
			b.WriteString(text)
		case "":
			return "", invalidContent
		}
	}
	return b.String(), nil
}

var invalidContent = invalid("", "expected a string or an array of content blocks, each with a \"type\"")
