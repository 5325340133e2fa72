package capture

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// isLLMPath reports whether path is an OpenAI completion endpoint.
func isLLMPath(path string) bool {
	return strings.HasSuffix(path, "/chat/completions") || strings.HasSuffix(path, "/completions")
}

// unparsedLLMPaths are LLM endpoints the proxy forwards but cannot record
// (their bodies are not OpenAI's), each with whose API it is. Longer
// suffixes come first: the first match names the path.
var unparsedLLMPaths = [...]struct{ suffix, api string }{
	{"/api/chat", "Ollama's native chat API"},
	{"/api/generate", "Ollama's native generate API"},
	{"/generate_stream", "TGI's native API"},
	{"/generate", "TGI's or SGLang's native API"},
	{"/v1/responses", "OpenAI's Responses API"},
	{"/v1/messages", "Anthropic's Messages API"},
}

// warnUnparsed logs, once per known endpoint per proxy, that LLM traffic to
// path passes through unrecorded, so a capture never silently misses it.
func (p *Proxy) warnUnparsed(path string) {
	for i, u := range unparsedLLMPaths {
		if !strings.HasSuffix(path, u.suffix) {
			continue
		}
		if p.warned[i].CompareAndSwap(false, true) {
			p.cfg.Logf("capture: POST %s is LLM traffic in %s, which capture does not parse: forwarded untouched, not recorded "+
				"(send it to the OpenAI-compatible /v1/chat/completions or /v1/completions to capture it; warned once per path)", path, u.api)
		}
		return
	}
}

// llmCall is what the recording needs from a request body.
type llmCall struct {
	model     string
	messages  []trace.Message
	chat      bool
	maxTokens int32
	// stream is the request's "stream": true; absent or false asks for one
	// JSON body (the OpenAI default).
	stream bool
	// tools and toolChoice are the request's "tools" and "tool_choice" as
	// compact JSON text, "" when absent.
	tools, toolChoice string
}

func parseLLMCall(body []byte) *llmCall {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
		Prompt              json.RawMessage `json:"prompt"`
		MaxTokens           *int32          `json:"max_tokens"`
		MaxCompletionTokens *int32          `json:"max_completion_tokens"`
		Stream              bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil
	}
	c := &llmCall{model: req.Model, chat: req.Messages != nil, stream: req.Stream,
		tools: compactJSON(req.Tools), toolChoice: compactJSON(req.ToolChoice)}
	switch {
	case req.MaxCompletionTokens != nil:
		c.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.maxTokens = *req.MaxTokens
	}
	for _, m := range req.Messages {
		msg := trace.Message{Role: m.Role, Content: contentText(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, trace.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: argumentsText(tc.Function.Arguments)})
		}
		c.messages = append(c.messages, msg)
	}
	if !c.chat {
		c.messages = []trace.Message{{Role: "user", Content: contentText(req.Prompt)}}
	}
	return c
}

// contentText flattens a message content: a string, or an array of parts
// (the text parts are kept), or a prompt array of strings.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, part := range parts {
		var txt struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(part, &s) == nil {
			b.WriteString(s)
		} else if json.Unmarshal(part, &txt) == nil {
			b.WriteString(txt.Text)
		}
	}
	return b.String()
}

// compactJSON is raw as compact JSON text, "" for absent or null.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// argumentsText is a tool call's arguments as the API carries them: the
// JSON string's value (an object some clients send is kept as its JSON).
func argumentsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compactJSON(raw)
}
