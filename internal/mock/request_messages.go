package mock

import (
	"fmt"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// messagesRequest is the subset of an Anthropic Messages request body the
// mock reads.
type messagesRequest struct {
	Model     string `json:"model"`
	MaxTokens *int   `json:"max_tokens"`
	System    any    `json:"system"` // a string or blocks, as content
	Messages  []struct {
		Role string `json:"role"`
		// Content is a string or blocks, decoded as generic JSON in the
		// body's one pass (see openAIMessage.Content).
		Content any `json:"content"`
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
	Type    string
	Source  *imageSource // image
	Text    string
	Content any // tool_result: a string or blocks
}

// contentBlocks reads content decoded as generic JSON: a string is nil
// blocks and ok; otherwise ok is false unless it is an array of objects
// whose members have the types the API declares.
func contentBlocks(v any) (blocks []block, ok bool) {
	if _, s := v.(string); s || v == nil {
		return nil, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	blocks = make([]block, len(list))
	for j, e := range list {
		o, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		b := &blocks[j]
		b.Content = o["content"]
		var okType, okText, okThinking bool
		b.Type, okType = optString(o["type"])
		b.Text, okText = optString(o["text"])
		_, okThinking = optString(o["thinking"])
		if !okType || !okText || !okThinking {
			return nil, false
		}
		switch src := o["source"].(type) {
		case nil:
		case map[string]any:
			b.Source = &imageSource{}
			for _, f := range []struct {
				dst  *string
				name string
			}{{&b.Source.Type, "type"}, {&b.Source.MediaType, "media_type"}, {&b.Source.Data, "data"}, {&b.Source.URL, "url"}} {
				if *f.dst, ok = optString(src[f.name]); !ok {
					return nil, false
				}
			}
		default:
			return nil, false
		}
	}
	return blocks, true
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
	if req.System != nil {
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
	Type, MediaType, Data, URL string
}

// blockImages reads the image blocks of a message's content, in order, as
// vLLM does: a base64 source becomes a data URI of its media type, a URL
// source the URL. msg is the index the message takes in the request's
// messages. Images inside a tool_result count with the message.
func blockImages(content any, m, msg int) ([]mediaRef, error) {
	blocks, ok := contentBlocks(content)
	if !ok {
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
func blocksText(content any) (string, error) {
	if s, ok := content.(string); ok {
		return s, nil
	}
	blocks, ok := contentBlocks(content)
	if !ok {
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
