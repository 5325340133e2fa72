package replay

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// The chat body carries tools, tool_choice, an assistant's tool calls and
// a tool result's tool_call_id as OpenAI defines them, parsed back by
// encoding/json; building it into a grown buffer allocates nothing.
func TestBodyToolCalls(t *testing.T) {
	o := &bodyOptions{endpoint: EndpointChat}
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	hist := []trace.Message{
		{Role: "user", Content: "weather in Paris and Rome?"},
		{Role: "assistant", ToolCalls: []trace.ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Rome"}`},
		}},
		{Role: "tool", Content: "sunny \"22\"", ToolCallID: "call_1"},
		{Role: "tool", Content: "rain", ToolCallID: "call_2"},
	}
	msgs := []trace.Message{{Role: "user", Content: "thanks"}}
	body := o.appendRequest(nil, "m", hist, msgs, 16, false, tools, `"required"`)
	var got struct {
		Messages []struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools      json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if len(got.Messages) != 5 || string(got.Tools) != tools || string(got.ToolChoice) != `"required"` {
		t.Fatalf("body %s", body)
	}
	a := got.Messages[1]
	if a.Content != nil || len(a.ToolCalls) != 2 || a.ToolCalls[1].ID != "call_2" || a.ToolCalls[1].Type != "function" ||
		a.ToolCalls[1].Function.Name != "get_weather" || a.ToolCalls[1].Function.Arguments != `{"city":"Rome"}` {
		t.Fatalf("assistant message %+v of %s", a, body)
	}
	if m := got.Messages[2]; m.Role != "tool" || *m.Content != `sunny "22"` || m.ToolCallID != "call_1" {
		t.Fatalf("tool message %+v", m)
	}
	if got.Messages[0].ToolCalls != nil || got.Messages[0].ToolCallID != "" {
		t.Fatalf("user message grew tool fields: %s", body)
	}
	// A chat body without tools is byte for byte what appendBody gives.
	if a, b := o.appendRequest(nil, "m", hist[:1], msgs, 16, false, "", ""), o.appendBody(nil, "m", hist[:1], msgs, 16, false); !reflect.DeepEqual(a, b) {
		t.Fatalf("%s != %s", a, b)
	}
	buf := make([]byte, 0, 4<<10)
	if n := testing.AllocsPerRun(100, func() {
		buf = o.appendRequest(buf[:0], "m", hist, msgs, 16, false, tools, `"required"`)
	}); n != 0 {
		t.Fatalf("%v allocations per body", n)
	}
}
