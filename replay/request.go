package replay

import (
	"math/rand/v2"
	"strconv"
	"unicode/utf8"

	"github.com/tracekit/tracekit/internal/fnv1a"

	"github.com/tracekit/tracekit/trace"
)

// Endpoint is the generation API a run drives.
type Endpoint string

// Endpoints replay can drive.
const (
	EndpointChat        Endpoint = "chat"        // /v1/chat/completions, messages
	EndpointCompletions Endpoint = "completions" // /v1/completions, history concatenated into prompt
)

// bodyOptions are the request fields that do not change within a run.
type bodyOptions struct {
	endpoint        Endpoint
	ignoreEOS       bool
	temperature     *float64
	continuousUsage bool
	// extra is the inside of the --extra-body object ("k":v,...), appended
	// last so its fields override tracekit's own (servers keep the last of
	// duplicate keys).
	extra []byte
}

// appendBody appends the JSON request body for model, the conversation so
// far (history, then this turn's messages) and maxTokens to dst, streamed
// with usage unless nonStreaming ("stream": false).
func (o *bodyOptions) appendBody(dst []byte, model string, history, msgs []trace.Message, maxTokens int32, nonStreaming bool) []byte {
	return o.appendRequest(dst, model, history, msgs, maxTokens, nonStreaming, "", "")
}

// appendRequest is appendBody with the turn's "tools" and "tool_choice"
// JSON texts (chat only; "" leaves a field out). They are copied as they
// are: trace.Turn.Check validated them when the trace was read.
func (o *bodyOptions) appendRequest(dst []byte, model string, history, msgs []trace.Message, maxTokens int32, nonStreaming bool, tools, toolChoice string) []byte {
	dst = append(dst, `{"model":`...)
	dst = appendJSONString(dst, model)
	if o.endpoint == EndpointCompletions {
		dst = append(dst, `,"prompt":"`...)
		first := true
		for _, part := range [][]trace.Message{history, msgs} {
			for _, m := range part {
				if !first {
					dst = append(dst, `\n\n`...)
				}
				first = false
				dst = appendJSONStringBody(dst, m.Content)
			}
		}
		dst = append(dst, '"')
	} else {
		dst = append(dst, `,"messages":[`...)
		first := true
		for _, part := range [][]trace.Message{history, msgs} {
			for _, m := range part {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = appendMessage(dst, &m)
			}
		}
		dst = append(dst, ']')
		if tools != "" {
			dst = append(dst, `,"tools":`...)
			dst = append(dst, tools...)
		}
		if toolChoice != "" {
			dst = append(dst, `,"tool_choice":`...)
			dst = append(dst, toolChoice...)
		}
	}
	if maxTokens > 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(maxTokens), 10)
	}
	if nonStreaming {
		dst = append(dst, `,"stream":false`...)
	} else {
		dst = append(dst, `,"stream":true,"stream_options":{"include_usage":true`...)
		if o.continuousUsage {
			dst = append(dst, `,"continuous_usage_stats":true`...)
		}
		dst = append(dst, '}')
	}
	if o.ignoreEOS {
		dst = append(dst, `,"ignore_eos":true`...)
	}
	if o.temperature != nil {
		dst = append(dst, `,"temperature":`...)
		dst = strconv.AppendFloat(dst, *o.temperature, 'g', -1, 64)
	}
	if len(o.extra) > 0 {
		dst = append(dst, ',')
		dst = append(dst, o.extra...)
	}
	return append(dst, '}')
}

// appendMessage appends one chat message: an assistant's tool calls as
// OpenAI's "tool_calls" (content null when it has no text, as the API
// sends it), a tool result's "tool_call_id".
func appendMessage(dst []byte, m *trace.Message) []byte {
	dst = append(dst, `{"role":`...)
	dst = appendJSONString(dst, m.Role)
	dst = append(dst, `,"content":`...)
	if m.Content == "" && len(m.ToolCalls) > 0 {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, m.Content)
	}
	if len(m.ToolCalls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendJSONString(dst, c.ID)
			dst = append(dst, `,"type":"function","function":{"name":`...)
			dst = appendJSONString(dst, c.Name)
			dst = append(dst, `,"arguments":`...)
			dst = appendJSONString(dst, c.Arguments)
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	if m.ToolCallID != "" {
		dst = append(dst, `,"tool_call_id":`...)
		dst = appendJSONString(dst, m.ToolCallID)
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendJSONStringBody(dst, s)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONStringBody appends s escaped for the inside of a JSON string;
// invalid UTF-8 becomes U+FFFD as encoding/json does.
func appendJSONStringBody(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// fillerWords are common English words that o200k_base and cl100k_base
// each encode as a single token when preceded by a space, so n of them make
// a text of n tokens.
var fillerWords = []string{
	" the", " of", " and", " to", " in", " is", " that", " for", " it", " as",
	" was", " with", " be", " by", " on", " not", " he", " this", " are", " or",
	" his", " from", " at", " which", " but", " have", " an", " had", " they", " you",
}

// fillerText synthesizes a text of about n tokens for a message whose
// content the trace redacted. Each conversation gets its own word sequence
// (seeded by seed and the conversation) so unrelated conversations do not
// share a cacheable prefix.
func fillerText(n int32, seed uint64, conv string) string {
	if n <= 0 {
		return ""
	}
	rng := rand.New(rand.NewPCG(seed, fnv1a.String(conv)))
	b := make([]byte, 0, int(n)*5)
	for range n {
		b = append(b, fillerWords[rng.IntN(len(fillerWords))]...)
	}
	return string(b[1:]) // the first word without its leading space
}
