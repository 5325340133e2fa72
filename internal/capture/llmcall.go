package capture

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tracekit/tracekit/internal/chatmsg"
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
		Model               string            `json:"model"`
		Messages            []chatmsg.Message `json:"messages"`
		Tools               json.RawMessage   `json:"tools"`
		ToolChoice          json.RawMessage   `json:"tool_choice"`
		Prompt              json.RawMessage   `json:"prompt"`
		MaxTokens           *int32            `json:"max_tokens"`
		MaxCompletionTokens *int32            `json:"max_completion_tokens"`
		Stream              bool              `json:"stream"`
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
	for i := range req.Messages {
		msg, _ := req.Messages[i].Decode() // a content of another shape records as no text
		c.messages = append(c.messages, msg)
	}
	if !c.chat {
		prompt, _ := chatmsg.ContentText(req.Prompt)
		c.messages = []trace.Message{{Role: "user", Content: prompt}}
	}
	return c
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
