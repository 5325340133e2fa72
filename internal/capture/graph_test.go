package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/trace"
)

func tmsg(role, content string) trace.Message { return trace.Message{Role: role, Content: content} }

// The grouping on its own: a tool-calling turn, two branches each fed one
// result, a join holding both, then a chat turn; an unrelated request
// starts its own conversation.
func TestConversationsGraph(t *testing.T) {
	cs := newConversations(1000)
	seg := &segment{}
	calls := trace.Message{Role: "assistant", ToolCalls: []trace.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}, {ID: "c2", Name: "f", Arguments: `{"a":2}`}}}
	u0 := []trace.Message{tmsg("system", "sys"), tmsg("user", "go")}
	c := &conv{id: "x", seg: seg}
	// turn 0
	if m := cs.match(u0); m.c != nil {
		t.Fatalf("a first request matched %+v", m)
	}
	c.seq = 1
	cs.register(c, seg, 0, u0, calls, 100)
	r1 := trace.Message{Role: "tool", ToolCallID: "c1", Content: "one"}
	r2 := trace.Message{Role: "tool", ToolCallID: "c2", Content: "two"}
	b1 := slices.Concat(u0, []trace.Message{calls, r1, r2, tmsg("user", "branch 1")})
	b2 := slices.Concat(u0, []trace.Message{calls, r1, r2, tmsg("user", "branch 2")})
	m := cs.match(b1)
	if m.c != c || m.histLen != 3 || len(m.parents) != 1 || m.parents[0].seq != 0 {
		t.Fatalf("branch 1: %+v", m)
	}
	c.seq = 2
	cs.register(c, seg, 1, b1, tmsg("assistant", "ans 1"), 200)
	// branch 2 continues turn 0 too, which is no longer the latest turn
	m = cs.match(b2)
	if m.c != c || m.histLen != 3 || len(m.parents) != 1 || m.parents[0].seq != 0 {
		t.Fatalf("branch 2: %+v", m)
	}
	c.seq = 3
	cs.register(c, seg, 2, b2, tmsg("assistant", "ans 2"), 250)
	// the join: branch 1's transcript, then branch 2's after the shared part
	join := slices.Concat(b1, []trace.Message{tmsg("assistant", "ans 1 "), tmsg("user", "branch 2"), tmsg("assistant", "ans 2"), tmsg("user", "both?")})
	m = cs.match(join)
	if m.c != c || len(m.parents) != 2 || m.parents[0].seq != 1 || m.parents[1].seq != 2 || m.histLen != len(join)-1 {
		t.Fatalf("join: %+v (histLen %d of %d)", m.parents, m.histLen, len(join))
	}
	// (the echoed "ans 1 " differs only in whitespace, which the hash
	// ignores.) A branch's answer not preceded by its own messages is no parent
	odd := slices.Concat(b1, []trace.Message{tmsg("assistant", "ans 1"), tmsg("assistant", "ans 2"), tmsg("user", "?")})
	if m = cs.match(odd); len(m.parents) != 1 || m.histLen != len(b1)+1 {
		t.Fatalf("an answer out of its context: %+v", m.parents)
	}
	// a tool result differs: no match of the branches, the primary is turn 0
	b3 := slices.Concat(u0, []trace.Message{calls, r1, {Role: "tool", ToolCallID: "c2", Content: "other"}, tmsg("user", "x")})
	if m = cs.match(b3); len(m.parents) != 1 || m.parents[0].seq != 0 {
		t.Fatalf("b3: %+v", m.parents)
	}
	if m = cs.match([]trace.Message{tmsg("user", "unrelated")}); m.c != nil {
		t.Fatalf("unrelated: %+v", m)
	}
}

// toolBody is a chat request with tools, tool_choice and messages that
// may carry tool calls and results.
func toolBody(t *testing.T, msgs []map[string]any) string {
	b, err := json.Marshal(map[string]any{"model": "tracekit-mock", "messages": msgs, "stream": true, "max_tokens": 8,
		"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}},
		"tool_choice": "auto"})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mm(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }

// Through the proxy: a request, two branches from its answer, a join
// holding both branch answers, a chat turn after it; and a request whose
// history carries tool calls and results.
func TestProxyGroupsGraphs(t *testing.T) { eachStack(t, testProxyGroupsGraphs) }

func testProxyGroupsGraphs(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), nil)
	send := func(msgs []map[string]any) string {
		t.Helper()
		st, _, body := post(t, ps.URL(), "/v1/chat/completions", toolBody(t, msgs), nil)
		if st != 200 {
			t.Fatalf("status %d: %s", st, body)
		}
		text, _ := sseAnswer(t, body)
		return text
	}
	u1 := mm("user", "plan the trip")
	a1 := send([]map[string]any{u1})
	u2, u3 := mm("user", "branch: flights"), mm("user", "branch: hotels")
	a2 := send([]map[string]any{u1, mm("assistant", a1), u2})
	a3 := send([]map[string]any{u1, mm("assistant", a1), u3})
	u4 := mm("user", "combine")
	a4 := send([]map[string]any{u1, mm("assistant", a1), u2, mm("assistant", a2), u3, mm("assistant", a3), u4})
	send([]map[string]any{u1, mm("assistant", a1), u2, mm("assistant", a2), u3, mm("assistant", a3), u4, mm("assistant", a4), mm("user", "thanks")})

	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		map[string]any{"id": "call_9", "type": "function", "function": map[string]any{"name": "f", "arguments": `{"q":"x"}`}}}}
	send([]map[string]any{mm("user", "use the tool"), call, map[string]any{"role": "tool", "tool_call_id": "call_9", "content": "42"}})

	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	rows := readTrace(t, ps.Proxy().Segments()[0].Trace)
	if len(rows) != 6 {
		t.Fatalf("%d rows", len(rows))
	}
	graph := rows[:5]
	for _, r := range graph {
		if r.ConversationID != graph[0].ConversationID {
			t.Fatalf("the graph split into conversations: %s and %s", graph[0].ConversationID, r.ConversationID)
		}
	}
	want := [][]int32{nil, nil, {0}, {1, 2}, nil}
	for k, r := range graph {
		if int(r.Turn) != k || !slices.Equal(r.Parents, want[k]) {
			t.Errorf("turn %d: parents %v, want %v", r.Turn, r.Parents, want[k])
		}
		if len(r.Messages) != 1 || r.Tools == "" || r.ToolChoice != `"auto"` {
			t.Errorf("turn %d: messages %+v tools %q choice %q", k, r.Messages, r.Tools, r.ToolChoice)
		}
	}
	if graph[3].Messages[0].Content != "combine" || graph[2].Messages[0].Content != "branch: hotels" {
		t.Errorf("new messages: join %+v, branch %+v", graph[3].Messages, graph[2].Messages)
	}
	tool := rows[5]
	if len(tool.Messages) != 3 || len(tool.Messages[1].ToolCalls) != 1 || tool.Messages[1].ToolCalls[0] != (trace.ToolCall{ID: "call_9", Name: "f", Arguments: `{"q":"x"}`}) ||
		tool.Messages[2].ToolCallID != "call_9" || tool.Messages[2].Role != "tool" || tool.Messages[1].Tokens <= 0 {
		t.Errorf("tool messages %s", fmt.Sprintf("%+v", tool.Messages))
	}
	// the recording agrees with the trace on every row's place
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != 6 {
		t.Fatalf("%d records", len(recs))
	}
}

// sseToolCalls assembles the streamed tool calls with an independent
// parse: fragments by index, id and name first, arguments concatenated.
func sseToolCalls(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	type frag struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var calls []map[string]any
	for _, line := range bytes.Split(body, []byte("\n")) {
		d, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || string(d) == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []frag `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(d, &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			for _, f := range ch.Delta.ToolCalls {
				for len(calls) <= f.Index {
					calls = append(calls, map[string]any{"type": "function", "function": map[string]any{"name": "", "arguments": ""}})
				}
				cl := calls[f.Index]
				if f.ID != "" {
					cl["id"] = f.ID
				}
				fn := cl["function"].(map[string]any)
				fn["name"] = fn["name"].(string) + f.Function.Name
				fn["arguments"] = fn["arguments"].(string) + f.Function.Arguments
			}
		}
	}
	return calls
}

// Answers that are tool calls: the proxy records them as the turn's
// reference tool calls, and requests feeding their results back (two
// branches, then a join holding both) become the graph they are.
func TestProxyGroupsToolCallAnswers(t *testing.T) { eachStack(t, testProxyGroupsToolCallAnswers) }

func testProxyGroupsToolCallAnswers(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), nil)
	send := func(msgs []map[string]any, hdr map[string]string) []byte {
		t.Helper()
		st, _, body := post(t, ps.URL(), "/v1/chat/completions", toolBody(t, msgs), hdr)
		if st != 200 {
			t.Fatalf("status %d: %s", st, body)
		}
		return body
	}
	u := mm("user", "look both up")
	calls := sseToolCalls(t, send([]map[string]any{u}, map[string]string{"X-Tracekit-Tool-Calls": "2"}))
	if len(calls) != 2 {
		t.Fatalf("the mock answered %d tool calls", len(calls))
	}
	asst := map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
	res := []map[string]any{
		{"role": "tool", "tool_call_id": calls[0]["id"], "content": "first result"},
		{"role": "tool", "tool_call_id": calls[1]["id"], "content": "second result"},
	}
	hist := append([]map[string]any{u, asst}, res...)
	b1 := append(slices.Clone(hist), mm("user", "branch 1"))
	b2 := append(slices.Clone(hist), mm("user", "branch 2"))
	a1, _ := sseAnswer(t, send(b1, nil))
	a2, _ := sseAnswer(t, send(b2, nil))
	send(append(slices.Clone(b1), mm("assistant", a1), mm("user", "branch 2"), mm("assistant", a2), mm("user", "join")), nil)
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	rows := readTrace(t, ps.Proxy().Segments()[0].Trace)
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	ref := rows[0].ReferenceToolCalls
	if len(ref) != 2 || ref[0].ID != calls[0]["id"] || ref[1].Name != calls[1]["function"].(map[string]any)["name"] || rows[0].ReferenceAnswer != "" {
		t.Fatalf("turn 0 reference tool calls %+v, the client got %v", ref, calls)
	}
	want := [][]int32{nil, nil, {0}, {1, 2}}
	for k, r := range rows {
		if r.ConversationID != rows[0].ConversationID || !slices.Equal(r.Parents, want[k]) {
			t.Errorf("turn %d of %s: parents %v, want %v", r.Turn, r.ConversationID, r.Parents, want[k])
		}
	}
	if m := rows[1].Messages; len(m) != 3 || m[0].Role != "tool" || m[0].ToolCallID != ref[0].ID || m[2].Content != "branch 1" {
		t.Errorf("branch 1 messages %+v", m)
	}
	if m := rows[3].Messages; len(m) != 1 || m[0].Content != "join" {
		t.Errorf("join messages %+v", m)
	}
}
