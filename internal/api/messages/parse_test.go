package messages_test

import (
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/messages"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads back what AppendRequest wrote.
func TestParseRequestInvertsAppendRequest(t *testing.T) {
	apitest.CheckParse(t, func(dst []byte, r *api.Request, msgs []trace.Message) []byte {
		return messages.AppendRequest(dst, r, nil, msgs)
	}, messages.ParseRequest)
}

// What clients send beyond replay's shape: string contents, system as
// blocks, thinking blocks (dropped), a tool_result of blocks.
func TestParseRequestClientShapes(t *testing.T) {
	c, err := messages.ParseRequest([]byte(`{"model":"c","max_tokens":5,"system":[{"type":"text","text":"sys"}],"messages":[` +
		`{"role":"user","content":"q"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"tool_use","id":"t1","name":"f","input":{"a": 1}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []trace.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "q"},
		{Role: "assistant", ToolCalls: []trace.ToolCall{{ID: "t1", Name: "f", Arguments: `{"a":1}`}}},
		{Role: "tool", ToolCallID: "t1", Content: "r"}}
	if len(c.Messages) != len(want) {
		t.Fatalf("messages %+v, want %+v", c.Messages, want)
	}
	for i := range want {
		if c.Messages[i].Role != want[i].Role || c.Messages[i].Content != want[i].Content || c.Messages[i].ToolCallID != want[i].ToolCallID ||
			len(c.Messages[i].ToolCalls) != len(want[i].ToolCalls) || (len(want[i].ToolCalls) > 0 && c.Messages[i].ToolCalls[0] != want[i].ToolCalls[0]) {
			t.Errorf("message %d: %+v, want %+v", i, c.Messages[i], want[i])
		}
	}
	if c.Stream || c.MaxTokens != 5 {
		t.Errorf("stream %v max %d", c.Stream, c.MaxTokens)
	}
}
