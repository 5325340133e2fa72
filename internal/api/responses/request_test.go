package responses

import (
	"encoding/json"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// A conversation with a tool round trip becomes instructions and input
// items: messages, a function_call per call, a function_call_output per
// result; the chat-shaped tools and tool_choice are rewritten.
func TestAppendRequestItems(t *testing.T) {
	hist := []trace.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Weather in \"Paris\"?"},
		{Role: "assistant", ToolCalls: []trace.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: "sunny"},
	}
	msgs := []trace.Message{{Role: "user", Content: "And tomorrow?"}}
	r := &api.Request{Model: "m", MaxTokens: 7, Tools: `[{"type":"function","function":{"name":"weather","description":"d","parameters":{"type":"object"}}}]`,
		ToolChoice: `{"type":"function","function":{"name":"weather"}}`, ReasoningEffort: "low", Extra: []byte(`"store":false`)}
	b := AppendRequest(nil, r, hist, msgs)
	want := `{"model":"m","instructions":"Be brief.","input":[` +
		`{"type":"message","role":"user","content":"Weather in \"Paris\"?"},` +
		`{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"sunny"},` +
		`{"type":"message","role":"user","content":"And tomorrow?"}],` +
		`"tools":[{"type":"function","name":"weather","description":"d","parameters":{"type":"object"}}],` +
		`"tool_choice":{"type":"function","name":"weather"},"max_output_tokens":7,"reasoning":{"effort":"low"},"stream":true,"store":false}`
	if string(b) != want {
		t.Errorf("body\n%s\nwant\n%s", b, want)
	}
	if !json.Valid(b) {
		t.Error("not JSON")
	}
	// Chained to the previous response: only the new items.
	r.PreviousResponseID, r.Tools, r.ToolChoice, r.Extra = "resp_1", "", "", nil
	b = AppendRequest(nil, r, hist, msgs)
	want = `{"model":"m","previous_response_id":"resp_1","instructions":"Be brief.","input":[{"type":"message","role":"user","content":"And tomorrow?"}],` +
		`"max_output_tokens":7,"reasoning":{"effort":"low"},"stream":true}`
	if string(b) != want {
		t.Errorf("stateful body\n%s\nwant\n%s", b, want)
	}
}

// The id of a streamed response (response.created) and of a body are
// kept for a chained next request.
func TestDecoderResponseID(t *testing.T) {
	enc, dec := NewEncoder(), NewDecoder()
	var out api.Out
	out.Reset()
	var ev api.Event
	h := &api.Head{ID: "x1", Model: "m"}
	b := enc.Begin(nil, h)
	// The first event is response.created: decode it alone.
	end := 0
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' && b[i+1] == '\n' {
			end = i
			break
		}
	}
	var data []byte
	for _, line := range splitLines(b[:end]) {
		if len(line) > 6 && string(line[:6]) == "data: " {
			data = line[6:]
		}
	}
	ev.Reset()
	dec.Event([]byte("response.created"), data, &out, &ev)
	if string(out.ResponseID) != "resp_x1" {
		t.Errorf("response id %q from %s", out.ResponseID, data)
	}
	out.Reset()
	ev.Reset()
	dec.Body(enc.Body(nil, h, &api.Answer{Text: "hi", Usage: api.NoUsage, Finish: api.FinishStop}), &out, &ev)
	if string(out.ResponseID) != "resp_x1" {
		t.Errorf("body response id %q", out.ResponseID)
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	return append(out, b[start:])
}
