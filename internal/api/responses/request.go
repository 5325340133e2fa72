package responses

import (
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/jsonscan"
	"github.com/tracekit/tracekit/trace"
)

// AppendRequest appends a /v1/responses request body for the conversation
// history then msgs: system messages become "instructions", the others
// input items (user and assistant messages; an assistant's tool calls as
// function_call items, tool results as function_call_output items). With
// r.PreviousResponseID the server holds the history: only msgs are sent,
// after "previous_response_id"; instructions are sent again, as the API
// does not carry them over from the previous response.
func AppendRequest(dst []byte, r *api.Request, history, msgs []trace.Message) []byte {
	dst = append(dst, `{"model":`...)
	dst = api.AppendString(dst, r.Model)
	parts := [2][]trace.Message{history, msgs}
	if r.PreviousResponseID != "" {
		parts[0] = nil
		dst = append(dst, `,"previous_response_id":`...)
		dst = api.AppendString(dst, r.PreviousResponseID)
	}
	first := true
	for _, part := range [2][]trace.Message{history, msgs} {
		for i := range part {
			if m := &part[i]; m.Role == "system" || m.Role == "developer" {
				if first {
					dst = append(dst, `,"instructions":"`...)
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
	dst = append(dst, `,"input":[`...)
	n := 0
	for _, part := range parts {
		for i := range part {
			dst, n = appendItems(dst, &part[i], n)
		}
	}
	dst = append(dst, ']')
	if r.Tools != "" {
		if tools, err := api.ParseTools(r.Tools); err == nil {
			dst = append(dst, `,"tools":[`...)
			for i, t := range tools {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"type":"function","name":`...)
				dst = api.AppendString(dst, t.Name)
				if t.Description != "" {
					dst = append(dst, `,"description":`...)
					dst = api.AppendString(dst, t.Description)
				}
				if len(t.Parameters) > 0 {
					dst = append(dst, `,"parameters":`...)
					dst = append(dst, t.Parameters...)
				}
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
	}
	if r.ToolChoice != "" {
		if c, err := api.ParseToolChoice(r.ToolChoice); err == nil {
			dst = append(dst, `,"tool_choice":`...)
			if c.Mode == "function" {
				dst = append(dst, `{"type":"function","name":`...)
				dst = api.AppendString(dst, c.Name)
				dst = append(dst, '}')
			} else {
				dst = api.AppendString(dst, c.Mode)
			}
		}
	}
	if r.MaxTokens > 0 {
		dst = append(dst, `,"max_output_tokens":`...)
		dst = strconv.AppendInt(dst, int64(r.MaxTokens), 10)
	}
	if r.ReasoningEffort != "" {
		dst = append(dst, `,"reasoning":{"effort":`...)
		dst = api.AppendString(dst, r.ReasoningEffort)
		dst = append(dst, '}')
	}
	if r.NonStreaming {
		dst = append(dst, `,"stream":false`...)
	} else {
		dst = append(dst, `,"stream":true`...)
	}
	dst = r.AppendCommon(dst)
	return append(dst, '}')
}

// appendItems appends the input items of one message (none for a system
// message, which is instructions), each after a "," unless it is the
// first (n items so far); it returns the new count.
func appendItems(dst []byte, m *trace.Message, n int) ([]byte, int) {
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	switch m.Role {
	case "system", "developer":
		return dst, n
	case "tool":
		sep()
		dst = append(dst, `{"type":"function_call_output","call_id":`...)
		dst = api.AppendString(dst, m.ToolCallID)
		dst = append(dst, `,"output":`...)
		dst = api.AppendString(dst, m.Content)
		return append(dst, '}'), n
	}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		sep()
		dst = append(dst, `{"type":"message","role":`...)
		dst = api.AppendString(dst, m.Role)
		dst = append(dst, `,"content":`...)
		if len(m.Media) > 0 {
			dst = appendParts(dst, m)
		} else {
			dst = api.AppendString(dst, m.Content)
		}
		dst = append(dst, '}')
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		sep()
		dst = append(dst, `{"type":"function_call","call_id":`...)
		dst = api.AppendString(dst, c.ID)
		dst = append(dst, `,"name":`...)
		dst = api.AppendString(dst, c.Name)
		dst = append(dst, `,"arguments":`...)
		dst = api.AppendString(dst, c.Arguments)
		dst = append(dst, '}')
	}
	return dst, n
}

// appendParts appends the content of a message with media: an
// input_text part, then an input_image part per image, its image_url a
// data URI (or the item's URL). Responses carries images only: synth and
// replay refuse other kinds on it before anything is sent.
func appendParts(dst []byte, m *trace.Message) []byte {
	dst = append(dst, `[{"type":"input_text","text":`...)
	dst = api.AppendString(dst, m.Content)
	dst = append(dst, '}')
	for i := range m.Media {
		if it := &m.Media[i]; it.Kind == trace.MediaImage {
			dst = append(dst, `,{"type":"input_image","image_url":`...)
			dst = api.AppendDataURI(dst, it)
			dst = append(dst, '}')
		}
	}
	return append(dst, ']')
}
