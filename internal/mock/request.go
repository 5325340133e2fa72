package mock

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/fnv1a"
)

// TokenCounter counts the tokens of a text. tokenizer.Tokenizer satisfies it.
type TokenCounter interface {
	Count(text string) int
}

// ApproxTokens is the default TokenCounter: every whitespace-separated word
// counts ceil(len(word)/4) tokens (at least 1), so a word of up to four
// bytes, like every word the mock generates, is exactly one token.
var ApproxTokens TokenCounter = approxCounter{}

type approxCounter struct{}

func (approxCounter) Count(s string) int {
	n := 0
	for w := range strings.FieldsSeq(s) {
		n += (len(w) + 3) / 4
	}
	return n
}

// Message is a chat message as the mock sees it: content parts of type text
// are joined without separator.
type Message struct {
	Role    string
	Content string
}

// segment is one link of a prompt's prefix hash chain: hash covers the
// prompt up to and including this segment, tokens counts those tokens.
type segment struct {
	hash   uint64
	tokens int
}

// prompt is what the mock computed from a request body.
type prompt struct {
	messages int    // chat messages, 1 for a completion prompt
	hash     uint64 // FNV-64a of the messages (see HashMessages)
	tokens   int
	segs     []segment
}

// chain extends the hash h by one message: role, NUL, content, NUL.
func chain(h uint64, role, content string) uint64 {
	return fnv1a.AddString(fnv1a.AddString(fnv1a.AddString(fnv1a.AddString(h, role), "\x00"), content), "\x00")
}

// HashMessages is the messages_hash of the log: FNV-64a over each message's
// role, a NUL byte, its content and a NUL byte, in order, as 16 hex digits.
// A completion prompt hashes as one message with role "prompt".
func HashMessages(msgs []Message) string {
	h := uint64(fnv1a.Offset)
	for _, m := range msgs {
		h = chain(h, m.Role, m.Content)
	}
	return hashHex(h)
}

func hashHex(h uint64) string { return fmt.Sprintf("%016x", h) }

// apiRequest is the subset of the OpenAI request body the mock reads.
type apiRequest struct {
	Model               string          `json:"model"`
	Messages            []apiMessage    `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	Stream              bool            `json:"stream"`
	N                   *int            `json:"n"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	StreamOptions       *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
}

type apiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// badRequest is a client error answered with vLLM's 400 body.
type badRequest struct {
	status int
	param  string
	msg    string
}

func (b *badRequest) Error() string { return b.msg }

func invalid(param, format string, a ...any) *badRequest {
	return &badRequest{status: 400, param: param, msg: fmt.Sprintf(format, a...)}
}

// parseRequest decodes and validates a body; chat selects the endpoint.
func parseRequest(body []byte, chat bool) (*apiRequest, error) {
	var req apiRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, invalid("", "request body is not valid JSON: byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return nil, invalid(te.Field, "field %q: expected %s, got JSON %s (byte %d)", te.Field, jsonKind(te.Type.String()), te.Value, te.Offset)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, invalid("", "request body is not valid JSON: it ends at byte %d inside a value", len(body))
		case len(bytes.TrimSpace(body)) == 0:
			return nil, invalid("", "request body is empty, expected a JSON object")
		}
		return nil, invalid("", "request body: %v", err)
	}
	if dec.More() {
		return nil, invalid("", "request body has data after the JSON object")
	}
	if chat {
		if req.Messages == nil {
			return nil, invalid("messages", "field \"messages\" is required")
		}
		if len(req.Messages) == 0 {
			return nil, invalid("messages", "field \"messages\" must contain at least one message")
		}
		for i, m := range req.Messages {
			if m.Role == "" {
				return nil, invalid("messages", "messages[%d]: field \"role\" is required", i)
			}
		}
	} else if len(req.Prompt) == 0 || string(req.Prompt) == "null" {
		return nil, invalid("prompt", "field \"prompt\" is required")
	}
	if req.N != nil && *req.N != 1 {
		return nil, invalid("n", "n=%d is not supported by the mock (only n=1)", *req.N)
	}
	for name, v := range map[string]*int{"max_tokens": req.MaxTokens, "max_completion_tokens": req.MaxCompletionTokens} {
		if v != nil && *v < 1 {
			return nil, invalid(name, "%s must be at least 1, got %d", name, *v)
		}
	}
	return &req, nil
}

// jsonKind names a Go type the way a JSON user thinks of it.
func jsonKind(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// messageText returns a chat message's content: a string, null, or an
// array of parts whose text parts are joined.
func messageText(i int, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
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

// completionBlock is how many bytes (or token ids) of a completion prompt
// one prefix-cache segment covers.
const completionBlock = 256

// buildPrompt counts and hashes the prompt of a validated request.
func buildPrompt(req *apiRequest, chat bool, tc TokenCounter) (prompt, error) {
	p := prompt{hash: fnv1a.Offset}
	if chat {
		p.messages = len(req.Messages)
		p.segs = make([]segment, 0, len(req.Messages))
		for i, m := range req.Messages {
			text, err := messageText(i, m.Content)
			if err != nil {
				return p, err
			}
			p.hash = chain(p.hash, m.Role, text)
			p.tokens += tc.Count(text)
			p.segs = append(p.segs, segment{p.hash, p.tokens})
		}
		return p, nil
	}
	p.messages = 1
	raw := req.Prompt
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return p, invalid("prompt", "prompt: %v", err)
		}
		p.hash = chain(p.hash, "prompt", s)
		p.tokens = tc.Count(s)
		// Segments cover whole blocks of the text so that a longer prompt
		// sharing a prefix hits the cache; the last segment is the prompt.
		h := uint64(fnv1a.Offset)
		for off := completionBlock; off < len(s); off += completionBlock {
			h = fnv1a.AddString(h, s[off-completionBlock:off])
			p.segs = append(p.segs, segment{h, tc.Count(s[:off])})
		}
		p.segs = append(p.segs, segment{p.hash, p.tokens})
	case '[':
		var ids []int
		if err := json.Unmarshal(raw, &ids); err != nil {
			return p, invalid("prompt", "prompt: expected a string or an array of token ids (batched prompts are not supported by the mock)")
		}
		h := uint64(fnv1a.Offset)
		var num []byte
		for i, id := range ids {
			num = strconv.AppendInt(num[:0], int64(id), 10)
			h = fnv1a.AddString(fnv1a.AddString(h, string(num)), ",")
			if (i+1)%completionBlock == 0 || i == len(ids)-1 {
				p.segs = append(p.segs, segment{h, i + 1})
			}
		}
		p.hash = chain(fnv1a.Offset, "prompt", string(raw))
		p.tokens = len(ids)
	default:
		return p, invalid("prompt", "prompt: expected a string or an array of token ids")
	}
	return p, nil
}

// hexHash parses a messages_hash.
func hexHash(s string) (uint64, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 {
		return 0, fmt.Errorf("messages hash %q: expected 16 hex digits", s)
	}
	var h uint64
	for _, c := range b {
		h = h<<8 | uint64(c)
	}
	return h, nil
}
