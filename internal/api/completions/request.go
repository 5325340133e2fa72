package completions

import (
	"github.com/tracekit/tracekit/internal/api/chat"
	"github.com/tracekit/tracekit/trace"
)

// The request side of /v1/completions: the conversation's messages
// concatenated into "prompt", each one's text escaped on its own (so a
// history is encoded once and copied, as chat's), then chat's request
// options but reasoning_effort, which completions does not have.

// RequestSep is what AppendRequestMessage writes between two messages
// (a blank line, escaped inside the prompt string).
const RequestSep = `\n\n`

// AppendRequestHead appends what a body holds before its first message.
func AppendRequestHead(dst []byte, model string) []byte {
	dst = append(dst, `{"model":`...)
	dst = chat.AppendString(dst, model)
	return append(dst, `,"prompt":"`...)
}

// AppendRequestMessage appends message m's text as the prompt carries it,
// after a RequestSep unless it is the first.
func AppendRequestMessage(dst []byte, m *trace.Message, first bool) []byte {
	if !first {
		dst = append(dst, RequestSep...)
	}
	return chat.AppendStringBody(dst, m.Content)
}

// AppendRequestTail closes the prompt and appends o's fields.
func AppendRequestTail(dst []byte, o *chat.RequestOptions) []byte {
	dst = append(dst, '"')
	opts := *o
	opts.ReasoningEffort = ""
	return chat.AppendRequestOptions(dst, &opts)
}
