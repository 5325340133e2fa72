package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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

// encTestMsgs is a history with every kind of message and escape.
func encTestMsgs() []trace.Message {
	return []trace.Message{
		{Role: "system", Content: "be \"terse\"\n"},
		{Role: "user", Content: "weather in Paris\tand Rome? é \xff \x02"},
		{Role: "assistant", ToolCalls: []trace.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", Content: "sunny \"22\"", ToolCallID: "call_1"},
		{Role: "assistant", Content: ""},
		{Role: "user", Content: "thanks \\ bye"},
	}
}

// Bodies built from pre-encoded history (a chat's buffer kept from turn
// to turn with a model switch, an open loop's encoded history, a graph's
// merged transcripts with a shared prefix) are byte for byte the bodies
// appendRequest encodes from the whole message list, for both endpoints;
// a turn built into a grown buffer allocates nothing.
func TestEncodedBodies(t *testing.T) {
	temp := 0.25
	msgs := encTestMsgs()
	for _, o := range []*bodyOptions{
		{endpoint: EndpointChat, ignoreEOS: true, temperature: &temp, continuousUsage: true, extra: []byte(`"top_p":1`)},
		{endpoint: EndpointCompletions},
	} {
		var cb convBody
		var enc encMsgs
		for k := range msgs {
			turn := &trace.Turn{OutputTokens: int32(k), NonStreaming: k == 2}
			if k == 3 && o.endpoint == EndpointChat {
				turn.Tools, turn.ToolChoice = `[{"type":"function","function":{"name":"f"}}]`, `"auto"`
			}
			model := "m"
			if k >= 4 {
				model = "other \"model\""
			}
			want := o.appendRequest(nil, model, msgs[:k], msgs[k:k+1], turn.OutputTokens, turn.NonStreaming, turn.Tools, turn.ToolChoice)
			cb.add(o, "m", &msgs[k])
			if got := cb.build(o, model, turn); !bytes.Equal(got, want) {
				t.Fatalf("%s turn %d: convBody\n%s\nwant\n%s", o.endpoint, k, got, want)
			}
			if got := o.appendBodyMsgs(nil, model, enc.b, len(enc.ends), msgs[k:k+1], turn); !bytes.Equal(got, want) {
				t.Fatalf("%s turn %d: appendBodyMsgs\n%s\nwant\n%s", o.endpoint, k, got, want)
			}
			enc.add(o, &msgs[k])
			if got := o.appendBodyEnc(nil, model, enc.b, turn); !bytes.Equal(got, want) {
				t.Fatalf("%s turn %d: appendBodyEnc\n%s\nwant\n%s", o.endpoint, k, got, want)
			}
		}
		// extend: every split of the list, and a list extended from its
		// start (a separator added) or onto nothing (one dropped).
		for i := 0; i <= len(msgs); i++ {
			for j := i; j <= len(msgs); j++ {
				var a encMsgs
				for k := range msgs[:i] {
					a.add(o, &msgs[k])
				}
				a.extend(o, &enc, j)
				want := o.appendRequest(nil, "m", msgs[:i], msgs[j:], 1, false, "", "")
				if got := o.appendBodyEnc(nil, "m", a.b, &trace.Turn{OutputTokens: 1}); !bytes.Equal(got, want) {
					t.Fatalf("%s extend %d+%d:\n%s\nwant\n%s", o.endpoint, i, j, got, want)
				}
				for k := range a.ends {
					if k > 0 && a.ends[k] <= a.ends[k-1] || int(a.ends[len(a.ends)-1]) != len(a.b) {
						t.Fatalf("%s extend %d+%d: ends %v of %d bytes", o.endpoint, i, j, a.ends, len(a.b))
					}
				}
			}
		}
		turn := &trace.Turn{OutputTokens: 16}
		if n := testing.AllocsPerRun(100, func() {
			cb.end, cb.n = cb.head, 0
			for k := range msgs {
				cb.add(o, "m", &msgs[k])
			}
			_ = cb.build(o, "m", turn)
		}); n != 0 {
			t.Fatalf("%s: %v allocations per conversation body", o.endpoint, n)
		}
		// An open-loop turn: its body copied out of the encoded history
		// into a grown buffer, the history grown by its messages in place.
		buf := o.appendBodyEnc(nil, "m", enc.b, turn)
		grown := enc.clone(4<<10, 16)
		if n := testing.AllocsPerRun(100, func() {
			buf = o.appendBodyEnc(buf[:0], "m", enc.b, turn)
			g := grown
			g.add(o, &msgs[1])
		}); n != 0 {
			t.Fatalf("%s: %v allocations per open-loop body", o.endpoint, n)
		}
	}
}

// benchConv is a 40-turn chat of realistic sizes: a question of about
// 600 bytes and an answer of about 1.5 KB a turn (about 80 KB of history
// at the last turn).
func benchConv() (turns []trace.Turn, answers []trace.Message) {
	q := strings.Repeat("please explain the \"next\" step of the plan in detail.\n", 11)
	a := strings.Repeat("The next step is to measure, then to change one thing at a time. ", 23)
	for k := range 40 {
		turns = append(turns, trace.Turn{Turn: int32(k), OutputTokens: 300,
			Messages: []trace.Message{{Role: "user", Content: fmt.Sprintf("%d: %s", k, q)}}})
		answers = append(answers, trace.Message{Role: "assistant", Content: fmt.Sprintf("%d: %s", k, a)})
	}
	return turns, answers
}

// BenchmarkBody40Turns is the client CPU spent building the request
// bodies of one 40-turn chat, per request: reencode is the encoder of
// before (the whole history encoded every turn), preencoded the chat's
// kept buffer (each message encoded once). kB-last is the last body.
func BenchmarkBody40Turns(b *testing.B) {
	o := &bodyOptions{endpoint: EndpointChat, ignoreEOS: true}
	turns, answers := benchConv()
	var last int
	b.Run("reencode", func(b *testing.B) {
		var buf []byte
		var hist []trace.Message
		b.ReportAllocs()
		for b.Loop() {
			hist = hist[:0]
			for k := range turns {
				t := &turns[k]
				buf = o.appendRequest(buf[:0], "m", hist, t.Messages, t.OutputTokens, false, "", "")
				hist = append(append(hist, t.Messages...), answers[k])
			}
			last = len(buf)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(turns)), "ns/request")
		b.ReportMetric(float64(last)/1e3, "kB-last")
	})
	b.Run("preencoded", func(b *testing.B) {
		var cb convBody
		b.ReportAllocs()
		for b.Loop() {
			cb.started = false
			for k := range turns {
				t := &turns[k]
				cb.add(o, "m", &t.Messages[0])
				last = len(cb.build(o, "m", t))
				cb.add(o, "m", &answers[k])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(turns)), "ns/request")
		b.ReportMetric(float64(last)/1e3, "kB-last")
	})
}

// --reasoning-effort reaches a chat body as reasoning_effort, after the
// run's fixed fields and before the extra body; completions has no such
// field, and without the option the body is as before.
func TestReasoningEffortChat(t *testing.T) {
	msgs := []trace.Message{{Role: "user", Content: "hi"}}
	o := bodyOptions{endpoint: EndpointChat, reasoningEffort: "high", extra: []byte(`"top_p":0.5`)}
	if b, want := string(o.appendBody(nil, "m", nil, msgs, 5, true)),
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":false,"reasoning_effort":"high","top_p":0.5}`; b != want {
		t.Errorf("chat body %s; want %s", b, want)
	}
	o.endpoint = EndpointCompletions
	if b := string(o.appendBody(nil, "m", nil, msgs, 5, true)); strings.Contains(b, "reasoning_effort") {
		t.Errorf("completions body %s", b)
	}
	o = bodyOptions{endpoint: EndpointChat}
	if b := string(o.appendBody(nil, "m", nil, msgs, 5, true)); b != `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":false}` {
		t.Errorf("chat body without the option: %s", b)
	}
}
