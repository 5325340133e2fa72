package apitest

import (
	"reflect"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// ParseCase is one request a generating API's AppendRequest encodes and
// its ParseRequest must read back.
type ParseCase struct {
	Name string
	Req  api.Request
	Msgs []trace.Message
}

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}]`

// ParseCases are conversations every generating API carries: a system
// prompt, history, an assistant's text and tool calls, tool results with
// their ids, tools and each tool choice.
func ParseCases() []ParseCase {
	call := func(id, name, args string) trace.ToolCall { return trace.ToolCall{ID: id, Name: name, Arguments: args} }
	return []ParseCase{
		{Name: "one user message", Req: api.Request{Model: "m", MaxTokens: 7},
			Msgs: []trace.Message{{Role: "user", Content: "hello \"there\"\n"}}},
		{Name: "system and history", Req: api.Request{Model: "m", MaxTokens: 100, NonStreaming: true},
			Msgs: []trace.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "q1"},
				{Role: "assistant", Content: "a1"}, {Role: "user", Content: "q2"}}},
		{Name: "tool calls and results", Req: api.Request{Model: "m", MaxTokens: 50, Tools: weatherTools, ToolChoice: `"auto"`},
			Msgs: []trace.Message{{Role: "system", Content: "use tools"}, {Role: "user", Content: "weather in Oslo and the time?"},
				{Role: "assistant", ToolCalls: []trace.ToolCall{call("call_1", "get_weather", `{"city":"Oslo"}`), call("call_2", "now", `{}`)}},
				{Role: "tool", ToolCallID: "call_1", Content: "rain"}, {Role: "tool", ToolCallID: "call_2", Content: "noon"},
				{Role: "assistant", Content: "Rain, at noon."}, {Role: "user", Content: "thanks"}}},
		{Name: "text and a tool call in one answer", Req: api.Request{Model: "m", MaxTokens: 9, Tools: weatherTools, ToolChoice: `"required"`},
			Msgs: []trace.Message{{Role: "user", Content: "weather?"},
				{Role: "assistant", Content: "Let me look.", ToolCalls: []trace.ToolCall{call("c9", "get_weather", `{"city":"Rome"}`)}},
				{Role: "tool", ToolCallID: "c9", Content: "sun"}}},
		{Name: "a forced function", Req: api.Request{Model: "m", MaxTokens: 3, Tools: weatherTools, ToolChoice: `{"type":"function","function":{"name":"now"}}`},
			Msgs: []trace.Message{{Role: "user", Content: "time"}}},
		{Name: "no tool", Req: api.Request{Model: "m", MaxTokens: 3, Tools: weatherTools, ToolChoice: `"none"`},
			Msgs: []trace.Message{{Role: "user", Content: "just talk"}}},
	}
}

// CheckParse encodes each case with appendRequest (the whole conversation
// as the new messages), parses the body with parse, and compares the
// messages, model, max tokens, stream, tools and tool choice with what
// was encoded. defaultMax is the max tokens an API sends when the
// request sets none.
func CheckParse(t *testing.T, appendRequest func([]byte, *api.Request, []trace.Message) []byte,
	parse func([]byte) (*api.Call, error)) {
	t.Helper()
	for _, tc := range ParseCases() {
		t.Run(tc.Name, func(t *testing.T) {
			body := appendRequest(nil, &tc.Req, tc.Msgs)
			c, err := parse(body)
			if err != nil {
				t.Fatalf("parse %s: %v", body, err)
			}
			if !reflect.DeepEqual(c.Messages, tc.Msgs) {
				t.Errorf("messages of %s:\n got %+v\nwant %+v", body, c.Messages, tc.Msgs)
			}
			if c.Model != tc.Req.Model || c.MaxTokens != tc.Req.MaxTokens || c.Stream == tc.Req.NonStreaming || !c.Conversation {
				t.Errorf("call %+v from %s, want model %s, max %d, stream %v", c, body, tc.Req.Model, tc.Req.MaxTokens, !tc.Req.NonStreaming)
			}
			if c.Tools != tc.Req.Tools || c.ToolChoice != tc.Req.ToolChoice {
				t.Errorf("tools %s choice %s from %s, want %s and %s", c.Tools, c.ToolChoice, body, tc.Req.Tools, tc.Req.ToolChoice)
			}
		})
	}
}
