package chatmsg

import (
	"encoding/json"
	"errors"
	"testing"
)

// Contents of every shape the two callers meet, flattened; a content of
// another shape is refused.
func TestContentText(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		err       bool
	}{
		{``, "", false},
		{`null`, "", false},
		{`"hi"`, "hi", false},
		{`[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]`, "ab", false},
		{`["one ", "two"]`, "one two", false},                         // a completions prompt list
		{`["a", null, "b"]`, "ab", false},                             // null adds nothing, not the part before it again
		{`[{"type":"text","content":"nested"}, 17]`, "nested", false}, // GenAI part content; token ids add nothing
		{`[{"content":[{"text":"deep"}]}]`, "deep", false},
		{`{"text":"x"}`, "", true},
		{`12`, "", true},
	} {
		got, err := ContentText(json.RawMessage(c.raw))
		if got != c.want || (err != nil) != c.err || (err != nil && !errors.Is(err, ErrContent)) {
			t.Errorf("%s: %q, %v; want %q, error %v", c.raw, got, err, c.want, c.err)
		}
	}
}

func TestArgumentsText(t *testing.T) {
	for raw, want := range map[string]string{``: "", `null`: "", `"{\"q\": 1}"`: `{"q": 1}`, `{ "q" : 1 }`: `{"q":1}`, ` "x" `: "x"} {
		if got := ArgumentsText(json.RawMessage(raw)); got != want {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
}

// A message decodes with its tool calls; a refused content keeps the rest.
func TestDecode(t *testing.T) {
	var m Message
	if err := json.Unmarshal([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`), &m); err != nil {
		t.Fatal(err)
	}
	got, err := m.Decode()
	if err != nil || got.Role != "assistant" || got.Content != "" || len(got.ToolCalls) != 1 || got.ToolCalls[0].ID != "c1" || got.ToolCalls[0].Name != "f" || got.ToolCalls[0].Arguments != `{"a":1}` {
		t.Fatalf("%+v %v", got, err)
	}
	m = Message{Role: "tool", ToolCallID: "c1", Content: json.RawMessage(`{"bad":1}`)}
	if got, err := m.Decode(); !errors.Is(err, ErrContent) || got.Role != "tool" || got.ToolCallID != "c1" {
		t.Fatalf("%+v %v", got, err)
	}
}
