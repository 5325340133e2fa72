package responses_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/responses"
	"github.com/tracekit/tracekit/trace"
)

// Real-shaped streams: OpenAI's (reasoning summary, "type" first) and
// vLLM's (reasoning_text, "type" last, the first argument fragment
// repeated in output_item.added).
func TestFixtures(t *testing.T) {
	apitest.Check(t, api.Responses, apitest.Fixture(t, "openai_summary.sse"), false, apitest.Want{
		Text: "2 + 2 = 4 — \"four\".", Reasoning: "**Adding numbers**\n\nTwo plus two is four.",
		Events: 4, Done: true, Usage: api.Usage{Prompt: 21, Completion: 140, Cached: 0, Reasoning: 128},
	})
	apitest.Check(t, api.Responses, apitest.Fixture(t, "vllm_reasoning_tool.sse"), false, apitest.Want{
		Reasoning: "The user wants the weather.",
		ToolCalls: []trace.ToolCall{
			{ID: "call_5e1a", Name: "get_weather", Arguments: `{"city": "Paris"}`},
			{ID: "call_77d0", Name: "get_time", Arguments: `{"tz": "CET"}`},
		},
		ToolFinish: true, Events: 5, Done: true, Usage: api.Usage{Prompt: 310, Completion: 42, Cached: 256, Reasoning: 9},
	})
	apitest.Check(t, api.Responses, apitest.Fixture(t, "openai_body.json"), true, apitest.Want{
		Text: "Let me check — one moment.", Reasoning: "Look up the weather.",
		ToolCalls:  []trace.ToolCall{{ID: "call_12345xyz", Name: "get_weather", Arguments: `{"location":"Paris, France"}`}},
		ToolFinish: true, Events: 1, Done: true, Usage: api.Usage{Prompt: 328, Completion: 52, Cached: 0, Reasoning: 0},
	})
}

var head = api.Head{ID: "r1", Model: "org/m", Created: 1700000000, Prompt: 12, Cached: 8, Completion: 9, Finish: api.FinishStop}

// What the encoder writes, the decoder reads back.
func TestEncoderRoundTrip(t *testing.T) {
	u := api.Usage{Prompt: 12, Completion: 9, Cached: 8, Reasoning: 2}
	pieces := []apitest.Piece{
		{Kind: apitest.Reasoning, Text: "think ", Tokens: 1},
		{Kind: apitest.Reasoning, Text: "\"hard\"", Tokens: 1},
		{Kind: apitest.Text, Text: "Hello\n", Tokens: 1},
		{Kind: apitest.Text, Text: " 😀", Tokens: 1},
		{Kind: apitest.ToolCall, ID: "call_1", Name: "get_weather", Text: `{"city": `, Tokens: 2},
		{Kind: apitest.ToolArgs, Text: `"Paris"}`, Tokens: 1},
		{Kind: apitest.ToolCall, ID: "call_2", Name: "get_time", Tokens: 0},
		{Kind: apitest.ToolArgs, Text: `{}`, Tokens: 1},
	}
	body := apitest.Encode(responses.NewEncoder(), &head, pieces, u, false)
	calls := []trace.ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris"}`},
		{ID: "call_2", Name: "get_time", Arguments: `{}`},
	}
	apitest.Check(t, api.Responses, body, false, apitest.Want{Text: "Hello\n 😀", Reasoning: `think "hard"`,
		ToolCalls: calls, ToolFinish: true, Events: 7, Done: true, Usage: u})

	// A length finish ends with response.incomplete: complete, not an
	// error, and not a tool-call finish.
	h := head
	h.Finish = api.FinishLength
	body = apitest.Encode(responses.NewEncoder(), &h, pieces[2:4], u, false)
	if !bytes.Contains(body, []byte(`"reason":"max_output_tokens"`)) {
		t.Errorf("no incomplete_details:\n%s", body)
	}
	apitest.Check(t, api.Responses, body, false, apitest.Want{Text: "Hello\n 😀", Events: 2, Done: true, Usage: u})

	// Without the terminal event the stream is truncated, and says what
	// it lacks.
	body = apitest.Encode(responses.NewEncoder(), &head, pieces[2:4], u, true)
	apitest.Check(t, api.Responses, body, false, apitest.Want{Text: "Hello\n 😀", Events: 2, Kind: trace.ErrStreamTruncated,
		MsgHas: "the body ended after 2 events without response.completed", Usage: api.NoUsage})

	// A whole body.
	a := api.Answer{Text: "all at once", Reasoning: "r", ToolCalls: calls, Usage: u, Finish: api.FinishToolCalls}
	apitest.Check(t, api.Responses, responses.NewEncoder().Body(nil, &head, &a), true, apitest.Want{
		Text: a.Text, Reasoning: "r", ToolCalls: calls, ToolFinish: true, Events: 1, Done: true, Usage: u})
}

// sse frames (type, data) pairs as a Responses server does.
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
	delta     = `{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"Hi"}`
	completed = `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6}}}`
)

var usage = api.Usage{Prompt: 5, Completion: 1, Cached: 0, Reasoning: 0}

func TestErrorsAndTolerance(t *testing.T) {
	cases := []struct {
		name string
		body []byte
		want apitest.Want
	}{
		{"an error event mid-stream keeps the server's code and words",
			sse("response.output_text.delta", delta, "error", `{"type":"error","sequence_number":2,"code":"rate_limit_exceeded","message":"Slow down; key sk-abcdefghijklmnopqrstu","param":null}`),
			apitest.Want{Text: "Hi", Events: 1, Kind: trace.ErrMalformed, MsgHas: "event 2: server error: (rate_limit_exceeded) Slow down; key <redacted>", Usage: api.NoUsage}},
		{"response.failed ends the stream with the response's error",
			sse("response.output_text.delta", delta, "response.failed", `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"output":[],"usage":null}}`),
			apitest.Want{Text: "Hi", Events: 1, Done: true, Kind: trace.ErrMalformed, MsgHas: "server error: (server_error) The model failed to generate a response.", Usage: api.NoUsage}},
		{"an error nested as an object, the HTTP envelope's shape",
			sse("", `{"error":{"message":"model not found","type":"NotFoundError","param":null,"code":404}}`),
			apitest.Want{Kind: trace.ErrMalformed, MsgHas: "server error: (404) model not found", Usage: api.NoUsage}},
		{"unknown event types are counted and tolerated; a [DONE] after the end is ignored",
			sse("response.output_text.delta", delta, "response.brand_new.delta", `{"type":"response.brand_new.delta","sequence_number":2,"delta":"x"}`,
				"", `{"sequence_number":3,"keepalive":true}`, "response.completed", completed, "", "[DONE]"),
			apitest.Want{Text: "Hi", Events: 1, Done: true, Unknown: 2, Usage: usage}},
		{"the event name stands in for a missing type",
			sse("response.output_text.delta", `{"item_id":"m","output_index":0,"delta":"Hi"}`, "response.completed", completed),
			apitest.Want{Text: "Hi", Events: 1, Done: true, Usage: usage}},
		{"an item streamed whole: the .done text is its only text",
			sse("response.output_text.done", `{"type":"response.output_text.done","item_id":"m","output_index":0,"content_index":0,"text":"all of it"}`,
				"response.output_text.delta", delta, "response.output_text.done", `{"type":"response.output_text.done","item_id":"m2","output_index":1,"content_index":0,"text":"Hi"}`,
				"response.completed", completed),
			apitest.Want{Text: "all of itHi", Events: 2, Done: true, Usage: usage}},
		{"chat chunks to a Responses request",
			sse("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`, "", "[DONE]"),
			apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "event 1: a chat answer where responses was asked for", Usage: api.NoUsage}},
		{"Anthropic events to a Responses request",
			sse("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`),
			apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a messages answer where responses was asked for", Usage: api.NoUsage}},
		{"interleaved tool calls are told apart by item id",
			sse("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fa","call_id":"call_a","name":"f","arguments":""}}`,
				"response.output_item.added", `{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fb","call_id":"call_b","name":"g","arguments":""}}`,
				"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fb","output_index":1,"delta":"{\"b\":"}`,
				"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fa","output_index":0,"delta":"{}"}`,
				"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fb","output_index":1,"delta":"2}"}`,
				"response.function_call_arguments.done", `{"type":"response.function_call_arguments.done","item_id":"fa","output_index":0,"arguments":"{}"}`,
				"response.completed", completed),
			apitest.Want{ToolCalls: []trace.ToolCall{{ID: "call_a", Name: "f", Arguments: "{}"}, {ID: "call_b", Name: "g", Arguments: `{"b":2}`}},
				ToolFinish: true, Events: 3, Done: true, Usage: usage}},
		{"a malformed event is malformed; the events around it still count",
			sse("response.output_text.delta", delta, "response.output_text.delta", `{"type":"response.output_text.delta","delta":"x"`, "response.output_text.delta", delta, "response.completed", completed),
			apitest.Want{Text: "HiHi", Events: 2, Done: true, Kind: trace.ErrMalformed, MsgHas: "event 2: not a valid JSON object", Usage: usage}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { apitest.Check(t, api.Responses, c.body, false, c.want) })
	}
	// Non-streaming: a failed response and a chat body.
	apitest.Check(t, api.Responses, []byte(`{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`), true,
		apitest.Want{Kind: trace.ErrMalformed, MsgHas: "(server_error) boom", Usage: api.NoUsage})
	apitest.Check(t, api.Responses, []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"content":"x"}}]}`), true,
		apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a chat answer where responses was asked for", Usage: api.NoUsage})
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
	body := apitest.Encode(responses.NewEncoder(), &head, pieces, api.Usage{Prompt: 1, Completion: 42, Cached: 0, Reasoning: 20}, false)
	apitest.NoAlloc(t, api.Responses, body, 1500)
	apitest.NoAlloc(t, api.Responses, apitest.Fixture(t, "vllm_reasoning_tool.sse"), 700)
	e := responses.NewEncoder()
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
	if strings.Contains(string(body), "\n\n\n") {
		t.Fatal("an event with an empty line inside")
	}
}
