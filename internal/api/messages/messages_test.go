package messages_test

import (
	"bytes"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/messages"
	"github.com/tracekit/tracekit/trace"
)

// Real-shaped streams: Anthropic's documented ones and vLLM's.
func TestFixtures(t *testing.T) {
	apitest.Check(t, api.Messages, apitest.Fixture(t, "anthropic_text.sse"), false, apitest.Want{
		Text: "Hello!", Events: 2, Done: true, Usage: api.Usage{Prompt: 25, Completion: 15, Cached: -1, Reasoning: -1},
	})
	apitest.Check(t, api.Messages, apitest.Fixture(t, "anthropic_thinking_tool.sse"), false, apitest.Want{
		Text: "Okay, let’s check.", Reasoning: "The user asks about the weather in Paris.\nI should call get_weather.",
		ToolCalls:  []trace.ToolCall{{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: `{"location": "Paris, France"}`}},
		ToolFinish: true, Events: 6, Done: true, Usage: api.Usage{Prompt: 472 + 2048, Completion: 89, Cached: 2048, Reasoning: -1},
	})
	apitest.Check(t, api.Messages, apitest.Fixture(t, "vllm_messages.sse"), false, apitest.Want{
		Text: "Paris.", Reasoning: "Short answer.", Events: 3, Done: true, Usage: api.Usage{Prompt: 57, Completion: 6, Cached: -1, Reasoning: -1},
	})
	apitest.Check(t, api.Messages, apitest.Fixture(t, "anthropic_body.json"), true, apitest.Want{
		Text: "I'll look that up.", Reasoning: "Need the weather tool.",
		ToolCalls:  []trace.ToolCall{{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location": "San Francisco, CA", "unit": "celsius"}`}},
		ToolFinish: true, Events: 1, Done: true, Usage: api.Usage{Prompt: 2095 + 100 + 1000, Completion: 503, Cached: 1000, Reasoning: -1},
	})
}

var head = api.Head{ID: "r1", Model: "claude-x", Created: 1700000000, Prompt: 30, Cached: 10, Completion: 9, Finish: api.FinishStop}

func TestEncoderRoundTrip(t *testing.T) {
	u := api.Usage{Prompt: 30, Completion: 9, Cached: 10, Reasoning: 2}
	pieces := []apitest.Piece{
		{Kind: apitest.Reasoning, Text: "think ", Tokens: 1},
		{Kind: apitest.Reasoning, Text: "\"hard\"", Tokens: 1},
		{Kind: apitest.Text, Text: "Hello\n", Tokens: 1},
		{Kind: apitest.Text, Text: " 😀", Tokens: 1},
		{Kind: apitest.ToolCall, ID: "toolu_1", Name: "get_weather", Text: `{"city": `, Tokens: 2},
		{Kind: apitest.ToolArgs, Text: `"Paris"}`, Tokens: 1},
		{Kind: apitest.ToolCall, ID: "toolu_2", Name: "get_time", Tokens: 0},
		{Kind: apitest.ToolArgs, Text: `{}`, Tokens: 1},
	}
	h := head
	h.Finish = api.FinishToolCalls
	body := apitest.Encode(messages.NewEncoder(), &h, pieces, u, false)
	calls := []trace.ToolCall{
		{ID: "toolu_1", Name: "get_weather", Arguments: `{"city": "Paris"}`},
		{ID: "toolu_2", Name: "get_time", Arguments: `{}`},
	}
	apitest.Check(t, api.Messages, body, false, apitest.Want{Text: "Hello\n 😀", Reasoning: `think "hard"`,
		ToolCalls: calls, ToolFinish: true, Events: 7, Done: true, Usage: u})
	for _, want := range []string{"event: ping\n", `"type":"signature_delta"`, `"stop_reason":"tool_use"`, `"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":10`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("stream lacks %s:\n%s", want, body)
		}
	}

	// Without message_stop the stream is truncated and says so.
	body = apitest.Encode(messages.NewEncoder(), &head, pieces[2:4], u, true)
	apitest.Check(t, api.Messages, body, false, apitest.Want{Text: "Hello\n 😀", Events: 2, Kind: trace.ErrStreamTruncated,
		MsgHas: "the body ended after 2 events without message_stop", Usage: u})

	// A whole body.
	a := api.Answer{Text: "all at once", Reasoning: "r", ToolCalls: calls, Usage: api.Usage{Prompt: 30, Completion: 9, Cached: 10, Reasoning: -1}, Finish: api.FinishToolCalls}
	apitest.Check(t, api.Messages, messages.NewEncoder().Body(nil, &head, &a), true, apitest.Want{
		Text: a.Text, Reasoning: "r", ToolCalls: calls, ToolFinish: true, Events: 1, Done: true, Usage: a.Usage})
}

func sse(events ...string) []byte {
	var b bytes.Buffer
	for i := 0; i+1 < len(events); i += 2 {
		if events[i] != "" {
			b.WriteString("event: " + events[i] + "\n")
		}
		b.WriteString("data: " + events[i+1] + "\n\n")
	}
	return b.Bytes()
}

const (
	start = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":5,"output_tokens":1}}}`
	delta = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`
	stop  = `{"type":"message_stop"}`
)

func TestErrorsAndTolerance(t *testing.T) {
	u := api.Usage{Prompt: 5, Completion: 1, Cached: -1, Reasoning: -1}
	cases := []struct {
		name string
		body []byte
		want apitest.Want
	}{
		{"an overloaded_error after HTTP 200 keeps its type and words",
			sse("message_start", start, "content_block_delta", delta, "error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`),
			apitest.Want{Text: "Hi", Events: 1, Kind: trace.ErrMalformed, MsgHas: "event 3: server error: (overloaded_error) Overloaded", Usage: u}},
		{"vLLM's converter error, then [DONE]: an error, not a clean end",
			sse("message_start", start, "error", `{"type":"error","error":{"type":"internal_error","message":"Invalid data format received"}}`, "", "[DONE]"),
			apitest.Want{Kind: trace.ErrMalformed, MsgHas: "(internal_error) Invalid data format received", Usage: u}},
		{"unknown event and delta types are counted and tolerated",
			sse("message_start", start, "content_block_delta", delta, "brand_new", `{"type":"brand_new","x":1}`,
				"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"future_delta","stuff":"x"}}`, "message_stop", stop),
			apitest.Want{Text: "Hi", Events: 1, Done: true, Unknown: 2, Usage: u}},
		{"the event name stands in for a missing type",
			sse("message_start", `{"message":{"usage":{"input_tokens":5,"output_tokens":1}}}`, "content_block_delta", `{"index":0,"delta":{"type":"text_delta","text":"Hi"}}`, "message_stop", `{}`),
			apitest.Want{Text: "Hi", Events: 1, Done: true, Usage: u}},
		{"[DONE] without message_stop is not the end",
			sse("message_start", start, "content_block_delta", delta, "", "[DONE]"),
			apitest.Want{Text: "Hi", Events: 1, Kind: trace.ErrStreamTruncated, MsgHas: "without message_stop", Usage: u}},
		{"chat chunks to a Messages request",
			sse("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`, "", "[DONE]"),
			apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "event 1: a chat answer where messages was asked for", Usage: api.NoUsage}},
		{"Responses events to a Messages request",
			sse("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1"}}`),
			apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a responses answer where messages was asked for", Usage: api.NoUsage}},
		{"a tool call without content_block_start still gathers its input; usage merges over events",
			sse("message_start", start,
				"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
				"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
				"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7,"cache_read_input_tokens":3,"output_tokens_details":{"thinking_tokens":2}}}`,
				"message_stop", stop),
			apitest.Want{ToolCalls: []trace.ToolCall{{Arguments: `{"a":1}`}}, ToolFinish: true, Events: 2, Done: true,
				Usage: api.Usage{Prompt: 8, Completion: 7, Cached: 3, Reasoning: 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { apitest.Check(t, api.Messages, c.body, false, c.want) })
	}
	apitest.Check(t, api.Messages, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_1"}`), true,
		apitest.Want{Kind: trace.ErrMalformed, MsgHas: "(invalid_request_error) max_tokens: Field required", Usage: api.NoUsage})
	apitest.Check(t, api.Messages, []byte(`{"id":"c","object":"chat.completion","choices":[]}`), true,
		apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a chat answer where messages was asked for", Usage: api.NoUsage})
}

func TestNoAlloc(t *testing.T) {
	var pieces []apitest.Piece
	for range 20 {
		pieces = append(pieces, apitest.Piece{Kind: apitest.Reasoning, Text: " r", Tokens: 1})
	}
	for range 20 {
		pieces = append(pieces, apitest.Piece{Kind: apitest.Text, Text: " t", Tokens: 1})
	}
	pieces = append(pieces, apitest.Piece{Kind: apitest.ToolCall, ID: "c", Name: "f", Text: "{", Tokens: 1}, apitest.Piece{Kind: apitest.ToolArgs, Text: "}", Tokens: 1})
	body := apitest.Encode(messages.NewEncoder(), &head, pieces, api.Usage{Prompt: 1, Completion: 42, Cached: 0, Reasoning: 20}, false)
	apitest.NoAlloc(t, api.Messages, body, 1500)
	apitest.NoAlloc(t, api.Messages, apitest.Fixture(t, "anthropic_thinking_tool.sse"), 700)
	e := messages.NewEncoder()
	buf := make([]byte, 0, 64<<10)
	text := []byte("word")
	if n := testing.AllocsPerRun(50, func() {
		b := e.Begin(buf[:0], &head)
		for range 20 {
			b = e.Text(b, text, 1)
		}
		b = e.ToolCall(b, "c", "f", text, 1)
		b = e.End(b, api.Usage{Prompt: 1, Completion: 21, Cached: 0, Reasoning: 0})
		e.Done(b)
	}); n != 0 {
		t.Fatalf("encoder: %v allocations per stream", n)
	}
}
