package record

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// vllmToolStream is a chat answer of two parallel tool calls as vLLM
// streams them: a role chunk, then per call a first fragment with id and
// name ("id" before "index", as vLLM's model orders it) and argument
// fragments, finish_reason "tool_calls", the usage chunk, [DONE].
const vllmToolStream = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-a1","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-b2","type":"function","index":1,"function":{"name":"get_time","arguments":"{\"tz\": \"CET\"}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"total_tokens":30,"completion_tokens":18}}

data: [DONE]

`

var wantCalls = []trace.ToolCall{
	{ID: "chatcmpl-tool-a1", Name: "get_weather", Arguments: `{"city": "Paris"}`},
	{ID: "chatcmpl-tool-b2", Name: "get_time", Arguments: `{"tz": "CET"}`},
}

// Streamed tool calls are assembled by index over fragments split at
// every byte boundary; each chunk with choices is an event (as vLLM's
// benchmark counts them), the argument text counts as its tokens.
func TestStreamToolCalls(t *testing.T) {
	s := NewStream(wordCounter{})
	for _, step := range []int{len(vllmToolStream), 1, 7, 64} {
		s.Reset()
		for i := 0; i < len(vllmToolStream); i += step {
			s.Feed([]byte(vllmToolStream[i:min(i+step, len(vllmToolStream))]), int64(i))
		}
		if k, msg := s.Verdict(); k != trace.ErrNone {
			t.Fatalf("step %d: %s %s", step, k, msg)
		}
		if got := s.AppendToolCalls(nil); !reflect.DeepEqual(got, wantCalls) || s.ToolCalls() != 2 || !s.ToolCallsFinish() {
			t.Fatalf("step %d: calls %+v (n %d, finish %v)", step, got, s.ToolCalls(), s.ToolCallsFinish())
		}
		var rec trace.Record
		s.Fill(&rec)
		// role, 4 tool-call chunks, the finish chunk; words of the
		// argument fragments: 0, 1 ({"city": ), 1, 2.
		if want := []int32{0, 0, 1, 1, 2, 0}; !reflect.DeepEqual(rec.EventTokens, want) || rec.ToolCalls != 2 || s.Text() != "" {
			t.Fatalf("step %d: tokens %v, tool calls %d, text %q", step, rec.EventTokens, rec.ToolCalls, s.Text())
		}
	}
	// Reset forgets the calls; a content answer has none.
	s.Reset()
	s.Feed([]byte(vllmChat), 1)
	var rec trace.Record
	s.Fill(&rec)
	if s.ToolCalls() != 0 || rec.ToolCalls != 0 || s.ToolCallsFinish() || len(s.AppendToolCalls(nil)) != 0 {
		t.Fatalf("content answer: %d calls", s.ToolCalls())
	}
}

// A non-streaming body's message.tool_calls (no "index") are the calls in
// order.
func TestJSONToolCalls(t *testing.T) {
	body := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"chatcmpl-tool-a1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},` +
		`{"id":"chatcmpl-tool-b2","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"CET\"}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}`
	s := NewStream(wordCounter{})
	s.FeedJSON([]byte(body), 3)
	if k, msg := s.Verdict(); k != trace.ErrNone {
		t.Fatal(k, msg)
	}
	if got := s.AppendToolCalls(nil); !reflect.DeepEqual(got, wantCalls) || !s.ToolCallsFinish() {
		t.Fatalf("calls %+v", got)
	}
	// vLLM's empty list means none.
	s.Reset()
	s.FeedJSON([]byte(strings.Replace(body, body[strings.Index(body, `"tool_calls":[`):strings.Index(body, `]},`)+1], `"tool_calls":[]`, 1)), 3)
	if s.ToolCalls() != 0 {
		t.Fatalf("empty tool_calls gave %d", s.ToolCalls())
	}
}

// A tool-call stream allocates nothing once the buffers have grown, like
// a content stream.
func TestToolCallsNoAlloc(t *testing.T) {
	s := NewStream(byteCounter{})
	var rec trace.Record
	b := []byte(vllmToolStream)
	run := func() {
		s.Reset()
		s.Feed(b, 1)
		s.Fill(&rec)
	}
	run()
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Fatalf("%v allocations per tool-call stream", n)
	}
}

// byteCounter counts bytes: a counter that allocates nothing itself.
type byteCounter struct{}

func (byteCounter) Count(s string) int { return len(s) }

// A delta may carry content and tool_calls together, "tool_calls":null
// (a content chunk), whitespace between tokens and escapes in every
// string; split anywhere across two reads, the calls, the text and each
// event's tokens come out the same.
func TestToolCallsMixedDeltas(t *testing.T) {
	stream := `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me","tool_calls":null},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":" check.","tool_calls":[{"index":0,"id":"call_\u0031","type":"function","function":{"name":"get_weather","arguments":"{\"city\": "}}]},"finish_reason":null}]}

data: { "choices" : [ { "delta" : { "tool_calls" : [ { "function" : { "arguments" : "\"Z\u00fcrich\\n\/x\"}" } , "index" : 0 } ] , "content" : null } , "finish_reason" : null } ] }

data: {"choices":[{"index":0,"delta":{"tool_calls":null,"content":" Done"},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	want := []trace.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: "{\"city\": \"Zürich\\n/x\"}"}}
	s := NewStream(wordCounter{})
	for split := 0; split <= len(stream); split++ {
		s.Reset()
		s.Feed([]byte(stream[:split]), 1)
		s.Feed([]byte(stream[split:]), 2)
		r := fill(s)
		if r.ErrorKind != trace.ErrNone {
			t.Fatalf("split %d: %s %s", split, r.ErrorKind, r.ErrorMessage)
		}
		if got := s.AppendToolCalls(nil); !reflect.DeepEqual(got, want) || !s.ToolCallsFinish() || r.ToolCalls != 1 {
			t.Fatalf("split %d: calls %+v finish %v (record %d)", split, got, s.ToolCallsFinish(), r.ToolCalls)
		}
		// Content words plus argument words per event: "Let me"; " check."
		// and `{"city": `; the rest of the arguments (its \n is two
		// bytes, not a line end); " Done".
		if wantTok := []int32{2, 2, 1, 1}; s.Text() != "Let me check. Done" || !reflect.DeepEqual(r.EventTokens, wantTok) {
			t.Fatalf("split %d: text %q tokens %v, want %v", split, s.Text(), r.EventTokens, wantTok)
		}
	}
	// A malformed tool_calls value makes the event malformed, as any bad
	// JSON does; the events around it still count.
	bad := strings.Replace(stream, `"tool_calls":[{"index":0,"id"`, `"tool_calls":[{"index":0 "id"`, 1)
	s.Reset()
	s.Feed([]byte(bad), 1)
	if r := fill(s); r.ErrorKind != trace.ErrMalformed || !strings.Contains(r.ErrorMessage, "event 2") || len(r.EventNs) != 3 {
		t.Fatalf("malformed tool_calls: %s %q, %d events", r.ErrorKind, r.ErrorMessage, len(r.EventNs))
	}
}
