package chat

import (
	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
	"strconv"

	"github.com/tracekit/tracekit/trace"
)

// The request side of /v1/chat/completions. A body is a head (the model,
// the opening of "messages"), the messages, each encoded on its own so
// that a conversation's history is encoded once and copied after (replay
// keeps the encodings: a turn's body costs its new messages and its
// tail), and a tail (the end of "messages", tools, then RequestOptions).
// /v1/completions shares the tail's fields (api/completions).

// RequestSep is what AppendRequestMessage writes between two messages.
const RequestSep = ","

// RequestOptions are the fields after a body's messages (prompt).
type RequestOptions struct {
	MaxTokens       int32 // 0: not sent
	NonStreaming    bool  // "stream": false; else streamed with usage
	ContinuousUsage bool  // vLLM's continuous_usage_stats
	IgnoreEOS       bool
	Temperature     *float64
	ReasoningEffort string // "" not sent
	// Extra is the inside of the run's --extra-body object ("k":v,...),
	// appended last so its fields override tracekit's own (servers keep
	// the last of duplicate keys).
	Extra []byte
}

// AppendRequestHead appends what a body holds before its first message.
func AppendRequestHead(dst []byte, model string) []byte {
	dst = append(dst, `{"model":`...)
	dst = AppendString(dst, model)
	return append(dst, `,"messages":[`...)
}

// AppendRequestMessage appends message m as the body carries it, after a
// RequestSep unless it is the first: encodings of messages concatenate.
func AppendRequestMessage(dst []byte, m *trace.Message, first bool) []byte {
	if !first {
		dst = append(dst, RequestSep...)
	}
	return AppendMessage(dst, m)
}

// AppendRequestTail appends what a body holds after its last message: the
// end of "messages", tools and tool_choice (JSON texts as the trace holds
// them, checked when it was read; "" leaves a field out), then o.
func AppendRequestTail(dst []byte, tools, toolChoice string, o *RequestOptions) []byte {
	dst = append(dst, ']')
	if tools != "" {
		dst = append(dst, `,"tools":`...)
		dst = append(dst, tools...)
	}
	if toolChoice != "" {
		dst = append(dst, `,"tool_choice":`...)
		dst = append(dst, toolChoice...)
	}
	return AppendRequestOptions(dst, o)
}

// AppendRequestOptions appends o's fields and closes the body.
func AppendRequestOptions(dst []byte, o *RequestOptions) []byte {
	if o.MaxTokens > 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(o.MaxTokens), 10)
	}
	if o.NonStreaming {
		dst = append(dst, `,"stream":false`...)
	} else {
		dst = append(dst, `,"stream":true,"stream_options":{"include_usage":true`...)
		if o.ContinuousUsage {
			dst = append(dst, `,"continuous_usage_stats":true`...)
		}
		dst = append(dst, '}')
	}
	if o.IgnoreEOS {
		dst = append(dst, `,"ignore_eos":true`...)
	}
	if o.Temperature != nil {
		dst = append(dst, `,"temperature":`...)
		dst = strconv.AppendFloat(dst, *o.Temperature, 'g', -1, 64)
	}
	if o.ReasoningEffort != "" {
		dst = append(dst, `,"reasoning_effort":`...)
		dst = AppendString(dst, o.ReasoningEffort)
	}
	if len(o.Extra) > 0 {
		dst = append(dst, ',')
		dst = append(dst, o.Extra...)
	}
	return append(dst, '}')
}

// AppendMessage appends one chat message: an assistant's tool calls as
// OpenAI's "tool_calls" (content null when it has no text, as the API
// sends it), a tool result's "tool_call_id".
func AppendMessage(dst []byte, m *trace.Message) []byte {
	dst = append(dst, `{"role":`...)
	dst = AppendString(dst, m.Role)
	dst = append(dst, `,"content":`...)
	switch {
	case len(m.Media) > 0:
		dst = appendParts(dst, m)
	case m.Content == "" && len(m.ToolCalls) > 0:
		dst = append(dst, "null"...)
	default:
		dst = AppendString(dst, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = AppendString(dst, c.ID)
			dst = append(dst, `,"type":"function","function":{"name":`...)
			dst = AppendString(dst, c.Name)
			dst = append(dst, `,"arguments":`...)
			dst = AppendString(dst, c.Arguments)
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	if m.ToolCallID != "" {
		dst = append(dst, `,"tool_call_id":`...)
		dst = AppendString(dst, m.ToolCallID)
	}
	return append(dst, '}')
}

// appendParts appends the content of a message with media: its text
// part, then a part per item in order, as vLLM and OpenAI take them:
// image_url and video_url with a data URI (or the item's URL), audio as
// input_audio's base64 data and format (audio_url when it has a URL).
func appendParts(dst []byte, m *trace.Message) []byte {
	dst = append(dst, `[{"type":"text","text":`...)
	dst = AppendString(dst, m.Content)
	dst = append(dst, '}')
	for i := range m.Media {
		it := &m.Media[i]
		switch {
		case it.Kind == trace.MediaAudio && it.URL == "":
			dst = append(dst, `,{"type":"input_audio","input_audio":{"data":"`...)
			dst = api.AppendBase64(dst, it)
			dst = append(dst, `","format":`...)
			dst = AppendString(dst, it.Format)
			dst = append(dst, "}}"...)
			continue
		case it.Kind == trace.MediaAudio:
			dst = append(dst, `,{"type":"audio_url","audio_url":{"url":`...)
		case it.Kind == trace.MediaVideo:
			dst = append(dst, `,{"type":"video_url","video_url":{"url":`...)
		default:
			dst = append(dst, `,{"type":"image_url","image_url":{"url":`...)
		}
		dst = api.AppendDataURI(dst, it)
		dst = append(dst, "}}"...)
	}
	return append(dst, ']')
}

// AppendString appends s as a JSON string literal.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendStringBody(dst, s)
	return append(dst, '"')
}

// AppendStringBody appends s escaped for the inside of a JSON string
// (jsonscan.AppendEscaped: invalid UTF-8 becomes U+FFFD, as encoding/json
// writes it).
func AppendStringBody(dst []byte, s string) []byte { return js.AppendEscaped(dst, s) }
