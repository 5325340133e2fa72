package mock

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// responsesRequest is the subset of an OpenAI Responses request body the
// mock reads.
type responsesRequest struct {
	Model           string  `json:"model"`
	Input           any     `json:"input"` // a string or items, decoded in the body's one pass
	Instructions    *string `json:"instructions"`
	MaxOutputTokens *int    `json:"max_output_tokens"`
	Stream          bool    `json:"stream"`
	IgnoreEOS       bool    `json:"ignore_eos"` // vLLM's extension, as on chat
	Reasoning       *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              *bool           `json:"store"`
}

// responsesItem is one input item: a message (with or without "type", as
// Ollama also accepts), a function call or its output; other items
// (reasoning, references) carry no prompt text for the mock.
type responsesItem struct {
	Type, Role      string
	Content, Output any // a string or parts
}

// inputItems reads input decoded as generic JSON as items; what is wrong
// names the item.
func inputItems(v any) ([]responsesItem, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("expected a string or an array of input items")
	}
	items := make([]responsesItem, len(list))
	for i, e := range list {
		o, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("item %d is not an object", i)
		}
		it := &items[i]
		var okType, okRole bool
		it.Type, okType = optString(o["type"])
		it.Role, okRole = optString(o["role"])
		if !okType || !okRole {
			return nil, fmt.Errorf("item %d: type and role are strings", i)
		}
		it.Content, it.Output = o["content"], o["output"]
	}
	return items, nil
}

// parseResponses decodes and validates a Responses body. The prompt is
// the instructions (a "system" message), then the input: a string is one
// user message; items are messages with their text parts joined, a
// function_call_output a "tool" message, a run of function_call items one
// assistant message without text (as a chat tool-call message is read).
func parseResponses(body []byte) (*genRequest, error) {
	var req responsesRequest
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	g := &genRequest{Model: req.Model, Stream: req.Stream, IgnoreEOS: req.IgnoreEOS, MaxTokens: req.MaxOutputTokens, maxParam: "max_output_tokens",
		store: req.Store == nil || *req.Store}
	if err := atLeastOne("max_output_tokens", req.MaxOutputTokens); err != nil {
		return nil, err
	}
	if req.Reasoning != nil {
		g.noReasoning = req.Reasoning.Effort == "none"
	}
	if req.PreviousResponseID != nil {
		if *req.PreviousResponseID == "" {
			return nil, invalid("previous_response_id", "previous_response_id must not be empty")
		}
		g.previous = *req.PreviousResponseID
	}
	if req.Instructions != nil && *req.Instructions != "" {
		g.msgs = append(g.msgs, Message{"system", *req.Instructions})
	}
	if req.Input == nil {
		return nil, invalid("input", "field \"input\" is required")
	}
	if s, ok := req.Input.(string); ok {
		g.msgs = append(g.msgs, Message{"user", s})
	} else {
		items, err := inputItems(req.Input)
		if err != nil {
			return nil, invalid("input", "input: %v", err)
		}
		if len(items) == 0 && g.previous == "" {
			return nil, invalid("input", "input must contain at least one item")
		}
		call := false // the last message is a function call's
		for i, it := range items {
			switch {
			case it.Type == "function_call":
				if !call {
					g.msgs = append(g.msgs, Message{"assistant", ""})
				}
				call = true
				continue
			case it.Type == "function_call_output":
				text, err := outputText(it.Output)
				if err != nil {
					return nil, invalid("input", "input[%d].output: %v", i, err)
				}
				g.msgs = append(g.msgs, Message{"tool", text})
			case it.Type == "message" || (it.Type == "" && it.Role != ""):
				if it.Role == "" {
					return nil, invalid("input", "input[%d]: field \"role\" is required", i)
				}
				text, err := partsText(it.Content, "input_text", "output_text", "text")
				if err != nil {
					return nil, invalid("input", "input[%d].content: %v", i, err)
				}
				refs, err := responsesMedia(it.Content, i, len(g.msgs))
				if err != nil {
					return nil, err
				}
				g.media = append(g.media, refs...)
				g.msgs = append(g.msgs, Message{it.Role, text})
			case it.Type == "":
				return nil, invalid("input", "input[%d]: expected an item with \"type\" or \"role\"", i)
			}
			call = false
		}
	}
	if err := g.responsesTools(&req); err != nil {
		return nil, err
	}
	return g, nil
}

// responsesTools reads the flat function tools and tool_choice.
func (g *genRequest) responsesTools(req *responsesRequest) error {
	for _, t := range req.Tools {
		if t.Type == "function" {
			g.tools = append(g.tools, t.Name)
		}
	}
	const want = "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"name\":...}"
	choice := strings.TrimSpace(string(req.ToolChoice))
	switch {
	case choice == "" || choice == "null" || choice == `"auto"` || choice == `"none"`:
	case choice == `"required"`:
		g.toolCalls = 1
	case strings.HasPrefix(choice, "{"):
		var c struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(req.ToolChoice, &c); err != nil || c.Name == "" {
			return invalid("tool_choice", want)
		}
		g.toolCalls, g.toolForced = 1, c.Name
	default:
		return invalid("tool_choice", want)
	}
	return nil
}

// partsText returns content given as a string or an array of parts: the
// text of the parts of the given types, joined.
func partsText(content any, types ...string) (string, error) {
	if content == nil {
		return "", nil
	}
	if s, ok := content.(string); ok {
		return s, nil
	}
	parts, ok := contentParts(content)
	if !ok {
		return "", errors.New("expected a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		for _, t := range types {
			if p.Type == t {
				b.WriteString(p.Text)
				break
			}
		}
	}
	return b.String(), nil
}

// responsesMedia reads the media parts of an input message's content:
// input_image with image_url (a data URI or an http(s) URL, as a string or
// {"url"}), and chat's input_audio part, which AIPerf sends here too. msg
// is the index the message takes in the request's messages.
func responsesMedia(content any, item, msg int) ([]mediaRef, error) {
	if _, ok := content.([]any); !ok {
		return nil, nil
	}
	parts, ok := contentParts(content)
	if !ok {
		return nil, invalid("input", "input[%d].content: expected an array of content parts", item)
	}
	var refs []mediaRef
	for j, p := range parts {
		where := fmt.Sprintf("input[%d].content[%d].%s", item, j, p.Type)
		switch p.Type {
		case "input_image":
			url, ok := partURL(p.ImageURL)
			if !ok {
				return nil, invalid("input", "%s: expected image_url, a data URI or an http(s) URL (file_id is not supported by the mock)", where)
			}
			refs = append(refs, mediaRef{param: "input", msg: msg, where: where, kind: trace.MediaImage, url: url})
		case "input_audio":
			if p.Audio == nil || p.Audio.Data == "" || p.Audio.Format == "" {
				return nil, invalid("input", "%s: expected input_audio {\"data\": base64, \"format\": \"wav\"}", where)
			}
			refs = append(refs, mediaRef{param: "input", msg: msg, where: where, kind: trace.MediaAudio, data: p.Audio.Data, format: p.Audio.Format})
		}
	}
	return refs, nil
}

// outputText is a function_call_output's output: a string, or parts.
func outputText(output any) (string, error) {
	return partsText(output, "input_text", "output_text", "text")
}
