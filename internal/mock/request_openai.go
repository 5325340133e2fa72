package mock

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tracekit/tracekit/trace"
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
	Role string `json:"role"`
	// Content is decoded as generic JSON (a string, null or an array of
	// parts) in the body's one pass: a nested json.Unmarshal would scan
	// every byte of a multi-megabyte image again per level.
	Content any `json:"content"`
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
			text, refs, err := messageText(i, m.Content)
			if err != nil {
				return nil, err
			}
			g.msgs[i] = Message{m.Role, text}
			g.media = append(g.media, refs...)
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

// chatPart is one content part of a chat message: text, or an image,
// video or audio item.
type chatPart struct {
	Type, Text         string
	ImageURL, VideoURL any        // image_url, video_url: {"url": ...} or the URL itself
	Audio              *audioPart // input_audio
}

// audioPart is an input_audio part's member: base64 data and its format.
type audioPart struct{ Data, Format string }

// contentParts reads a content array decoded as generic JSON; ok is false
// when it is not an array of objects whose members have chatPart's types.
func contentParts(v any) (parts []chatPart, ok bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	parts = make([]chatPart, len(list))
	for j, e := range list {
		o, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		p := &parts[j]
		if p.Type, ok = optString(o["type"]); !ok {
			return nil, false
		}
		if p.Text, ok = optString(o["text"]); !ok {
			return nil, false
		}
		p.ImageURL, p.VideoURL = o["image_url"], o["video_url"]
		switch a := o["input_audio"].(type) {
		case nil:
		case map[string]any:
			p.Audio = &audioPart{}
			if p.Audio.Data, ok = optString(a["data"]); !ok {
				return nil, false
			}
			if p.Audio.Format, ok = optString(a["format"]); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return parts, true
}

// optString reads an optional string member: absent or null is "".
func optString(v any) (string, bool) {
	if v == nil {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
}

// partURL reads an image_url or video_url member: {"url": ...}, or the URL
// as a string.
func partURL(v any) (string, bool) {
	switch u := v.(type) {
	case string:
		return u, u != ""
	case map[string]any:
		s, ok := u["url"].(string)
		return s, ok && s != ""
	}
	return "", false
}

// messageText returns a chat message's content: a string, null, or an
// array of parts whose text parts are joined; and its media parts
// (image_url, video_url, input_audio), in order.
func messageText(i int, content any) (string, []mediaRef, error) {
	if content == nil {
		return "", nil, nil
	}
	if s, ok := content.(string); ok {
		return s, nil, nil
	}
	parts, ok := contentParts(content)
	if !ok {
		return "", nil, invalid("messages", "messages[%d].content: expected a string or an array of content parts", i)
	}
	var b strings.Builder
	var refs []mediaRef
	for j, p := range parts {
		where := fmt.Sprintf("messages[%d].content[%d].%s", i, j, p.Type)
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "image_url", "video_url":
			raw, kind := p.ImageURL, trace.MediaImage
			if p.Type == "video_url" {
				raw, kind = p.VideoURL, trace.MediaVideo
			}
			url, ok := partURL(raw)
			if !ok {
				return "", nil, invalid("messages", "%s: expected {\"url\": a data URI or an http(s) URL}", where)
			}
			refs = append(refs, mediaRef{param: "messages", msg: i, where: where, kind: kind, url: url})
		case "input_audio":
			if p.Audio == nil || p.Audio.Data == "" || p.Audio.Format == "" {
				return "", nil, invalid("messages", "%s: expected {\"data\": base64, \"format\": \"wav\" or \"mp3\"}", where)
			}
			refs = append(refs, mediaRef{param: "messages", msg: i, where: where, kind: trace.MediaAudio, data: p.Audio.Data, format: p.Audio.Format})
		}
	}
	return b.String(), refs, nil
}
