package mock

import (
	"encoding/json"
	"strings"
)

// openAIRequest is the subset of a chat or completions request body the
// mock reads.
type openAIRequest struct {
	Model               string          `json:"model"`
	Messages            []openAIMessage `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	Stream              bool            `json:"stream"`
	N                   *int            `json:"n"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	StreamOptions       *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
}

type openAIMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatTool is one entry of a chat request's "tools", and the object form
// of its tool_choice.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// parseOpenAI decodes and validates a chat (chat true) or completions body.
func parseOpenAI(body []byte, chat bool) (*genRequest, error) {
	var req openAIRequest
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	g := &genRequest{Model: req.Model, Stream: req.Stream, IgnoreEOS: req.IgnoreEOS, MaxTokens: req.MaxCompletionTokens, maxParam: "max_tokens",
		noReasoning: req.ReasoningEffort == "none" || !chat}
	if g.MaxTokens == nil {
		g.MaxTokens = req.MaxTokens
	}
	if so := req.StreamOptions; so != nil {
		g.IncludeUsage, g.ContinuousUsage = so.IncludeUsage, so.ContinuousUsageStats
	}
	if chat {
		if req.Messages == nil {
			return nil, invalid("messages", "field \"messages\" is required")
		}
		if len(req.Messages) == 0 {
			return nil, invalid("messages", "field \"messages\" must contain at least one message")
		}
		g.msgs = make([]Message, len(req.Messages))
		for i, m := range req.Messages {
			if m.Role == "" {
				return nil, invalid("messages", "messages[%d]: field \"role\" is required", i)
			}
			text, err := messageText(i, m.Content)
			if err != nil {
				return nil, err
			}
			g.msgs[i] = Message{m.Role, text}
		}
		if err := g.chatTools(req.Tools, req.ToolChoice); err != nil {
			return nil, err
		}
	} else if !present(req.Prompt) {
		return nil, invalid("prompt", "field \"prompt\" is required")
	} else {
		g.prompt = req.Prompt
	}
	if req.N != nil && *req.N != 1 {
		return nil, invalid("n", "n=%d is not supported by the mock (only n=1)", *req.N)
	}
	for name, v := range map[string]*int{"max_tokens": req.MaxTokens, "max_completion_tokens": req.MaxCompletionTokens} {
		if err := atLeastOne(name, v); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// chatTools reads chat's tools and tool_choice.
func (g *genRequest) chatTools(rawTools, rawChoice json.RawMessage) error {
	var tools []chatTool
	if present(rawTools) {
		if err := json.Unmarshal(rawTools, &tools); err != nil {
			return invalid("tools", "tools: expected an array of {\"type\":\"function\",\"function\":{\"name\":...}}: %v", err)
		}
	}
	for _, t := range tools {
		g.tools = append(g.tools, t.Function.Name)
	}
	const want = "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}"
	choice := strings.TrimSpace(string(rawChoice))
	switch {
	case choice == "" || choice == "null" || choice == `"auto"` || choice == `"none"`:
	case choice == `"required"`:
		g.toolCalls = 1
	case strings.HasPrefix(choice, "{"):
		var c chatTool
		if err := json.Unmarshal(rawChoice, &c); err != nil || c.Function.Name == "" {
			return invalid("tool_choice", want)
		}
		g.toolCalls, g.toolForced = 1, c.Function.Name
	default:
		return invalid("tool_choice", want)
	}
	return nil
}

// messageText returns a chat message's content: a string, null, or an
// array of parts whose text parts are joined.
func messageText(i int, raw json.RawMessage) (string, error) {
	if !present(raw) {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid("messages", "messages[%d].content: %v", i, err)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid("messages", "messages[%d].content: expected a string or an array of content parts", i)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}
