package chat_test

import (
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/chat"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads back what AppendRequest wrote.
func TestParseRequestInvertsAppendRequest(t *testing.T) {
	apitest.CheckParse(t, func(dst []byte, r *api.Request, msgs []trace.Message) []byte {
		dst = chat.AppendRequestHead(dst, r.Model)
		for i := range msgs {
			dst = chat.AppendRequestMessage(dst, &msgs[i], i == 0)
		}
		return chat.AppendRequestTail(dst, r.Tools, r.ToolChoice, &chat.RequestOptions{MaxTokens: r.MaxTokens, NonStreaming: r.NonStreaming})
	}, chat.ParseRequest)
}
