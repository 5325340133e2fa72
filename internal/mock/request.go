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

	"github.com/tracekit/tracekit/internal/api"
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
// are joined without separator. The other APIs' prompts are read as the
// same messages (request_responses.go, request_messages.go).
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
	messages int    // chat messages, 1 for a completion prompt, items of an embeddings, rerank or score request
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
// A completion prompt hashes as one message with role "prompt"; a
// Responses request's instructions and a Messages request's system prompt
// are a first message with role "system". A message's media items follow
// it as messages of role "media" whose content is the lower-case hex
// SHA-256 of the item's bytes.
func HashMessages(msgs []Message) string {
	h := uint64(fnv1a.Offset)
	for _, m := range msgs {
		h = chain(h, m.Role, m.Content)
	}
	return hashHex(h)
}

func hashHex(h uint64) string { return fmt.Sprintf("%016x", h) }

// genRequest is what the mock reads of a request to a generating API
// (chat, completions, Responses, Messages), whichever API's fields it came
// in: each API's parser fills it.
type genRequest struct {
	Model     string
	Stream    bool
	MaxTokens *int   // the API's output limit
	maxParam  string // its field's name, for errors
	IgnoreEOS bool
	// IncludeUsage and ContinuousUsage are chat's and completions'
	// stream_options.
	IncludeUsage, ContinuousUsage bool

	msgs   []Message       // the prompt as messages (every API but completions)
	prompt json.RawMessage // a completion prompt

	tools      []string // function names of the request's tools, in order
	toolCalls  int      // calls tool_choice asks for: 0, or 1 ("required" or a named function)
	toolForced string   // the function tool_choice names, if it does

	noReasoning bool // the request turned reasoning off
	budget      int  // a cap on reasoning tokens (Messages thinking.budget_tokens), 0 none

	// media are the request's images, video and audio items, each in
	// the message (an index in msgs) that carries it.
	media []mediaRef

	// Responses: the response whose transcript goes before msgs, and
	// whether this one's is kept for a later request.
	previous string
	store    bool
}

// badRequest is a client error answered with the API's error body.
type badRequest struct {
	status int
	param  string
	msg    string
}

func (b *badRequest) Error() string { return b.msg }

func invalid(param, format string, a ...any) *badRequest {
	return &badRequest{status: 400, param: param, msg: fmt.Sprintf(format, a...)}
}

// decodeBody decodes a request body, one JSON object, into v; what is
// wrong with a bad one is said with its byte offset or field.
func decodeBody(body []byte, v any) error {
	// Unmarshal reads the body in place; a Decoder copies it into a buffer
	// it grows, megabytes for a body with images, so it only explains a
	// failure.
	first := json.Unmarshal(body, v)
	if first == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return invalid("", "request body is not valid JSON: byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return invalid(te.Field, "field %q: expected %s, got JSON %s (byte %d)", te.Field, jsonKind(te.Type.String()), te.Value, te.Offset)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return invalid("", "request body is not valid JSON: it ends at byte %d inside a value", len(body))
		case len(bytes.TrimSpace(body)) == 0:
			return invalid("", "request body is empty, expected a JSON object")
		}
		return invalid("", "request body: %v", err)
	}
	if dec.More() {
		return invalid("", "request body has data after the JSON object")
	}
	return invalid("", "request body: %v", first)
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
	case strings.Contains(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// present reports whether a raw member was given and is not null.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// parseRequest decodes and validates the body of a request to the
// generating API name.
func parseRequest(body []byte, name api.Name) (*genRequest, error) {
	switch name {
	case api.Responses:
		return parseResponses(body)
	case api.Messages:
		return parseMessages(body)
	}
	return parseOpenAI(body, name == api.Chat)
}

// atLeastOne checks an output limit.
func atLeastOne(name string, v *int) error {
	if v != nil && *v < 1 {
		return invalid(name, "%s must be at least 1, got %d", name, *v)
	}
	return nil
}

// completionBlock is how many bytes (or token ids) of a completion prompt
// one prefix-cache segment covers.
const completionBlock = 256

// buildPrompt counts and hashes the prompt of a validated request: its
// messages and their media items, or a completion prompt.
func buildPrompt(req *genRequest, media []mediaItem, tc TokenCounter) (prompt, error) {
	if req.prompt == nil {
		return messagesPrompt(req.msgs, media, tc), nil
	}
	return completionPrompt(req.prompt, tc)
}

// messagesPrompt chains msgs, one prefix-cache segment per message. A
// message's media items (media, in message order) follow its text in the
// chain as messages of role "media" whose content is the hex SHA-256 of
// their bytes, so that the same text with other images is another prompt
// (as a server's prefix cache keys blocks on the images' hashes), and
// their tokens count with the message.
func messagesPrompt(msgs []Message, media []mediaItem, tc TokenCounter) prompt {
	p := prompt{hash: fnv1a.Offset, messages: len(msgs), segs: make([]segment, 0, len(msgs))}
	for i, m := range msgs {
		p.hash = chain(p.hash, m.Role, m.Content)
		p.tokens += tc.Count(m.Content)
		for len(media) > 0 && media[0].msg == i {
			p.hash = chain(p.hash, "media", media[0].sum)
			p.tokens += media[0].tokens
			media = media[1:]
		}
		p.segs = append(p.segs, segment{p.hash, p.tokens})
	}
	return p
}

// completionPrompt counts and hashes a completion prompt: a string or an
// array of token ids.
func completionPrompt(raw json.RawMessage, tc TokenCounter) (prompt, error) {
	p := prompt{hash: fnv1a.Offset, messages: 1}
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
