package messages

import (
	"encoding/json"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// A conversation with a tool round trip: system on top, tool_use blocks
// in the assistant's message, tool results as tool_result blocks of one
// user message with the next question, max_tokens always, thinking.
func TestAppendRequestBlocks(t *testing.T) {
	hist := []trace.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Weather?"},
		{Role: "assistant", Content: "Checking.", ToolCalls: []trace.ToolCall{
			{ID: "c1", Name: "weather", Arguments: `{"city":"Paris"}`}, {ID: "c2", Name: "weather", Arguments: `not json`}}},
		{Role: "tool", ToolCallID: "c1", Content: "sunny"},
		{Role: "tool", ToolCallID: "c2", Content: "rain"},
	}
	msgs := []trace.Message{{Role: "user", Content: "Thanks."}}
	r := &api.Request{Model: "m", ThinkingBudget: 1024, Tools: `[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]`,
		ToolChoice: `"required"`}
	b := AppendRequest(nil, r, hist, msgs)
	want := `{"model":"m","system":"Be brief.","messages":[` +
		`{"role":"user","content":[{"type":"text","text":"Weather?"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"c1","name":"weather","input":{"city":"Paris"}},{"type":"tool_use","id":"c2","name":"weather","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"},{"type":"tool_result","tool_use_id":"c2","content":"rain"},{"type":"text","text":"Thanks."}]}],` +
		`"tools":[{"name":"weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},` +
		`"max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":1024},"stream":true}`
	if string(b) != want {
		t.Errorf("body\n%s\nwant\n%s", b, want)
	}
	if !json.Valid(b) {
		t.Error("not JSON")
	}
}

// --ignore-eos reaches a Messages body as on chat (vLLM's field), after
// the stream and before the temperature and the extra body; without it
// nothing is sent that the Anthropic API would refuse.
func TestAppendRequestIgnoreEOS(t *testing.T) {
	temp := 0.5
	msgs := []trace.Message{{Role: "user", Content: "Hi"}}
	b := AppendRequest(nil, &api.Request{Model: "m", MaxTokens: 8, IgnoreEOS: true, Temperature: &temp, Extra: []byte(`"top_k":3`)}, nil, msgs)
	want := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"max_tokens":8,"stream":true,"ignore_eos":true,"temperature":0.5,"top_k":3}`
	if string(b) != want {
		t.Errorf("body\n%s\nwant\n%s", b, want)
	}
	if b := AppendRequest(nil, &api.Request{Model: "m", MaxTokens: 8}, nil, msgs); json.Valid(b) && string(b) != `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"max_tokens":8,"stream":true}` {
		t.Errorf("plain body %s", b)
	}
}
