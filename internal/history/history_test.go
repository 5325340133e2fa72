package history

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// The rule, case by case: what each parent adds to the history merged so
// far, in the order listed.
func TestMerge(t *testing.T) {
	u := func(s string) trace.Message { return trace.Message{Role: "user", Content: s, Tokens: 1} }
	call := func(id string) trace.Message {
		return trace.Message{Role: "assistant", ToolCalls: []trace.ToolCall{{ID: id, Name: "search", Arguments: "{}"}}, Tokens: 1}
	}
	result := func(id string) trace.Message {
		return trace.Message{Role: "tool", Content: "r", ToolCallID: id, Tokens: 1}
	}
	a, b, c, d, e := u("a"), u("b"), u("c"), u("d"), u("e")
	a9 := a
	a9.Tokens = 9
	ts := func(t ...[]trace.Message) [][]trace.Message { return t }
	m := func(msgs ...trace.Message) []trace.Message { return msgs }
	for _, tc := range []struct {
		name string
		in   [][]trace.Message
		want []trace.Message
	}{
		{"no parent", nil, nil},
		{"one parent", ts(m(a, b)), m(a, b)},
		{"empty parents add nothing", ts(nil, m(a), nil), m(a)},
		{"two branches of one context", ts(m(a, b, c), m(a, b, d)), m(a, b, c, d)},
		{"listed order", ts(m(a, b, d), m(a, b, c)), m(a, b, d, c)},
		{"a parent the history holds", ts(m(a, b, c), m(a, b)), m(a, b, c)},
		{"the same parent twice", ts(m(a, b), m(a, b)), m(a, b)},
		{"nothing shared", ts(m(a), m(b, c)), m(a, b, c)},
		{"shared with the merge so far, not the first parent", ts(m(a, b), m(a, c), m(a, b, c, d)), m(a, b, c, d)},
		{"a prefix of the merge so far and more", ts(m(a, b, c), m(a, b, d), m(a, b, c, e)), m(a, b, c, d, e)},
		{"token counts are not compared: the first count stays", ts(m(a, b), m(a9, c)), m(a, b, c)},
		{"tool calls are compared", ts(m(a, call("x"), result("x")), m(a, call("y"), result("y"))),
			m(a, call("x"), result("x"), call("y"), result("y"))},
		{"tool call ids are compared", ts(m(call("x"), result("x")), m(call("x"), result("z"))),
			m(call("x"), result("x"), result("z"))},
	} {
		got := Merge(tc.in...)
		if g, w := show(got), show(tc.want); g != w {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, g, w)
		}
		if len(got) > 0 {
			got[0].Content = "changed" // the result shares no memory with a parent
			for i, p := range tc.in {
				for j := range p {
					if p[j].Content == "changed" {
						t.Fatalf("%s: parent %d message %d changed with the merged history", tc.name, i, j)
					}
				}
			}
		}
	}
}

// show renders messages as role:content, tool calls, tool call id and
// token count, one field each.
func show(msgs []trace.Message) string {
	var parts []string
	for _, m := range msgs {
		s := m.Role + ":" + m.Content
		for _, c := range m.ToolCalls {
			s += " call " + c.ID
		}
		if m.ToolCallID != "" {
			s += " for " + m.ToolCallID
		}
		parts = append(parts, s+fmt.Sprintf(" #%d", m.Tokens))
	}
	return "[" + strings.Join(parts, " | ") + "]"
}
