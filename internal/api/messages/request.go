package messages

import (
	"encoding/json"
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/jsonscan"
	"github.com/tracekit/tracekit/trace"
)

// Version is the anthropic-version header every request carries.
const Version = "2023-06-01"

// AppendRequest appends a /v1/messages request body for the conversation
// history then msgs: system messages joined into the top-level "system",
// the others as messages of content blocks (text; an assistant's tool
// calls as tool_use blocks; tool results as tool_result blocks of a user
// message). Neighbours of the same role merge into one message, as the
// API wants user and assistant to alternate. max_tokens is always sent
// (the API requires it): r.MaxTokens, or api.DefaultMaxTokens.
func AppendRequest(dst []byte, r *api.Request, history, msgs []trace.Message) []byte {
	dst = append(dst, `{"model":`...)
	dst = api.AppendString(dst, r.Model)
	parts := [2][]trace.Message{history, msgs}
	first := true
	for _, part := range parts {
		for i := range part {
			if m := &part[i]; m.Role == "system" || m.Role == "developer" {
				if first {
					dst = append(dst, `,"system":"`...)
				} else {
					dst = append(dst, `\n\n`...)
				}
				dst = jsonscan.AppendEscaped(dst, m.Content)
				first = false
			}
		}
	}
	if !first {
		dst = append(dst, '"')
	}
	dst = append(dst, `,"messages":[`...)
	role := ""
	for _, part := range parts {
		for i := range part {
			m := &part[i]
			if m.Role == "system" || m.Role == "developer" {
				continue
			}
			r := "user"
			if m.Role == "assistant" {
				r = "assistant"
			}
			if r == role {
				dst = append(dst, ',')
			} else {
				if role != "" {
					dst = append(dst, "]},"...)
				}
				dst = append(dst, `{"role":"`...)
				dst = append(dst, r...)
				dst = append(dst, `","content":[`...)
				role = r
			}
			dst = appendBlocks(dst, m)
		}
	}
	if role != "" {
		dst = append(dst, "]}"...)
	}
	dst = append(dst, ']')
	if r.Tools != "" {
		if tools, err := api.ParseTools(r.Tools); err == nil {
			dst = append(dst, `,"tools":[`...)
			for i, t := range tools {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"name":`...)
				dst = api.AppendString(dst, t.Name)
				if t.Description != "" {
					dst = append(dst, `,"description":`...)
					dst = api.AppendString(dst, t.Description)
				}
				dst = append(dst, `,"input_schema":`...)
				if len(t.Parameters) > 0 {
					dst = append(dst, t.Parameters...)
				} else {
					dst = append(dst, `{"type":"object"}`...)
				}
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
	}
	if r.ToolChoice != "" {
		if c, err := api.ParseToolChoice(r.ToolChoice); err == nil {
			switch c.Mode {
			case "function":
				dst = append(dst, `,"tool_choice":{"type":"tool","name":`...)
				dst = api.AppendString(dst, c.Name)
				dst = append(dst, '}')
			case "required":
				dst = append(dst, `,"tool_choice":{"type":"any"}`...)
			case "none":
				dst = append(dst, `,"tool_choice":{"type":"none"}`...)
			default:
				dst = append(dst, `,"tool_choice":{"type":"auto"}`...)
			}
		}
	}
	maxTokens := int64(r.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = api.DefaultMaxTokens
	}
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, maxTokens, 10)
	if r.ThinkingBudget > 0 {
		dst = append(dst, `,"thinking":{"type":"enabled","budget_tokens":`...)
		dst = strconv.AppendInt(dst, int64(r.ThinkingBudget), 10)
		dst = append(dst, '}')
	}
	if r.NonStreaming {
		dst = append(dst, `,"stream":false`...)
	} else {
		dst = append(dst, `,"stream":true`...)
	}
	// ignore_eos is vLLM's, as on chat: sent only when asked for (the
	// Anthropic API itself refuses fields it does not know).
	dst = r.AppendCommon(dst)
	return append(dst, '}')
}

// appendBlocks appends the content blocks of one message: a tool
// result's tool_result block, or a text block (when it has text, or
// nothing else) and a tool_use block per tool call.
func appendBlocks(dst []byte, m *trace.Message) []byte {
	if m.Role == "tool" {
		dst = append(dst, `{"type":"tool_result","tool_use_id":`...)
		dst = api.AppendString(dst, m.ToolCallID)
		dst = append(dst, `,"content":`...)
		dst = api.AppendString(dst, m.Content)
		return append(dst, '}')
	}
	n := 0
	if m.Content != "" || len(m.ToolCalls) == 0 {
		dst = append(dst, `{"type":"text","text":`...)
		dst = api.AppendString(dst, m.Content)
		dst = append(dst, '}')
		n++
	}
	for i := range m.Media {
		it := &m.Media[i]
		if it.Kind != trace.MediaImage {
			continue // Messages carries images only: refused before the run
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		if it.URL != "" {
			dst = append(dst, `{"type":"image","source":{"type":"url","url":`...)
			dst = api.AppendString(dst, it.URL)
		} else {
			dst = append(dst, `{"type":"image","source":{"type":"base64","media_type":`...)
			dst = api.AppendString(dst, api.MIME(it))
			dst = append(dst, `,"data":"`...)
			dst = api.AppendBase64(dst, it)
			dst = append(dst, '"')
		}
		dst = append(dst, "}}"...)
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, `{"type":"tool_use","id":`...)
		dst = api.AppendString(dst, c.ID)
		dst = append(dst, `,"name":`...)
		dst = api.AppendString(dst, c.Name)
		dst = append(dst, `,"input":`...)
		dst = appendInput(dst, c.Arguments)
		dst = append(dst, '}')
	}
	return dst
}

// appendInput appends a tool call's arguments as the JSON object tool_use
// carries: the text as it is when it is one, else {} (a model may emit
// arguments that do not parse; the API accepts only an object).
func appendInput(dst []byte, args string) []byte {
	if len(args) > 0 && args[0] == '{' && json.Valid([]byte(args)) {
		return append(dst, args...)
	}
	if args == "" {
		return append(dst, "{}"...)
	}
	var v any
	if json.Unmarshal([]byte(args), &v) == nil {
		if _, ok := v.(map[string]any); ok {
			return append(dst, args...)
		}
	}
	return append(dst, "{}"...)
}
