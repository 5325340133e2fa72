package chat_test

import (
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/chat"
	"github.com/tracekit/tracekit/internal/api/completions"
	"github.com/tracekit/tracekit/trace"
)

var head = api.Head{ID: "r1", Model: `org/m "q"`, Created: 1700000000, Prompt: 12, Cached: 8, Completion: 6, Finish: api.FinishStop}

// What the encoder writes, the decoder reads back: text with escapes,
// reasoning, the usage chunk, [DONE]; the role chunk and the finish
// chunk are output events as vLLM's are.
func TestEncoderRoundTrip(t *testing.T) {
	pieces := []apitest.Piece{
		{Kind: apitest.Reasoning, Text: "think \"hard\"", Tokens: 2},
		{Kind: apitest.Text, Text: "Hello\n", Tokens: 1},
		{Kind: apitest.Text, Text: " wide\tworld 😀", Tokens: 2},
		{Kind: apitest.Text, Text: "", Tokens: 1},
	}
	u := api.Usage{Prompt: 12, Completion: 6, Cached: 8, Reasoning: 2}
	for _, so := range []struct{ include, continuous bool }{{false, false}, {true, false}, {false, true}} {
		h := head
		h.IncludeUsage, h.ContinuousUsage = so.include, so.continuous
		body := apitest.Encode(chat.NewEncoder(), &h, pieces, u, false)
		want := apitest.Want{Text: "Hello\n wide\tworld 😀", Reasoning: `think "hard"`, Events: 5, Done: true, Usage: api.NoUsage}
		switch {
		case so.continuous:
			want.Usage = u // the last chunk's usage; each chunk's before it is cumulative
		case so.include:
			want.Usage = u
		}
		apitest.Check(t, api.Chat, body, false, want)
		if so.continuous {
			_, r := apitest.Parse(t, api.Chat, body, len(body), false)
			if !r.TokensExact || r.EventTokens[0] != 0 || r.EventTokens[1] != 2 || r.EventTokens[4] != 1 {
				t.Errorf("continuous usage: exact %v tokens %v", r.TokensExact, r.EventTokens)
			}
		}
		// The finish_reason rides on the chunk that reaches the plan.
		if n := strings.Count(string(body), `"finish_reason":"stop"`); n != 1 {
			t.Errorf("%d chunks carry the finish_reason, want 1:\n%s", n, body)
		}
	}
	// Without a plan, End adds a finish chunk of its own.
	h := head
	h.Completion = 0
	body := apitest.Encode(chat.NewEncoder(), &h, pieces[1:2], api.NoUsage, false)
	if !strings.Contains(string(body), `"finish_reason":"stop"`) {
		t.Errorf("no finish chunk:\n%s", body)
	}
	apitest.Check(t, api.Chat, body, false, apitest.Want{Text: "Hello\n", Events: 3, Done: true, Usage: api.NoUsage})
}

func TestEncoderToolCalls(t *testing.T) {
	h := head
	h.Finish, h.Completion, h.IncludeUsage = api.FinishToolCalls, 5, true
	pieces := []apitest.Piece{
		{Kind: apitest.ToolCall, ID: "call_1", Name: "get_weather", Text: `{"city": `, Tokens: 2},
		{Kind: apitest.ToolArgs, Text: `"Paris"}`, Tokens: 1},
		{Kind: apitest.ToolCall, ID: "call_2", Name: "get_time", Text: `{"tz": "CET"}`, Tokens: 2},
	}
	body := apitest.Encode(chat.NewEncoder(), &h, pieces, api.Usage{Prompt: 12, Completion: 5, Cached: -1, Reasoning: -1}, false)
	apitest.Check(t, api.Chat, body, false, apitest.Want{
		ToolCalls: []trace.ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris"}`},
			{ID: "call_2", Name: "get_time", Arguments: `{"tz": "CET"}`},
		},
		ToolFinish: true, Events: 4, Done: true, Usage: api.Usage{Prompt: 12, Completion: 5, Cached: -1, Reasoning: -1},
	})
}

func TestEncoderBody(t *testing.T) {
	a := api.Answer{Text: "all \"at\" once", Reasoning: "hmm", Usage: api.Usage{Prompt: 3, Completion: 4, Cached: 0, Reasoning: 1}, Finish: api.FinishStop}
	body := chat.NewEncoder().Body(nil, &head, &a)
	apitest.Check(t, api.Chat, body, true, apitest.Want{Text: a.Text, Reasoning: "hmm", Events: 1, Done: true, Usage: a.Usage})
	a = api.Answer{ToolCalls: []trace.ToolCall{{ID: "c1", Name: "f", Arguments: `{"x": 1}`}}, Usage: api.Usage{Prompt: 3, Completion: 4, Cached: -1, Reasoning: -1}, Finish: api.FinishToolCalls}
	body = chat.NewEncoder().Body(nil, &head, &a)
	apitest.Check(t, api.Chat, body, true, apitest.Want{ToolCalls: a.ToolCalls, ToolFinish: true, Events: 1, Done: true, Usage: a.Usage})
	a = api.Answer{Text: "plain", Usage: api.Usage{Prompt: 3, Completion: 1, Cached: -1, Reasoning: -1}, Finish: api.FinishLength}
	body = completions.NewEncoder().Body(nil, &head, &a)
	if !strings.Contains(string(body), `"object":"text_completion"`) {
		t.Errorf("completion body: %s", body)
	}
	apitest.Check(t, api.Completions, body, true, apitest.Want{Text: "plain", Events: 1, Done: true, Usage: a.Usage})
}

// Completions carry text only: reasoning and tool calls write nothing
// (their tokens still count toward the plan).
func TestCompletionsEncoder(t *testing.T) {
	h := head
	h.Completion, h.ContinuousUsage = 3, true
	pieces := []apitest.Piece{
		{Kind: apitest.Reasoning, Text: "not here", Tokens: 1},
		{Kind: apitest.Text, Text: "one", Tokens: 1},
		{Kind: apitest.Text, Text: " two", Tokens: 1},
	}
	u := api.Usage{Prompt: 12, Completion: 3, Cached: 8, Reasoning: -1}
	body := apitest.Encode(completions.NewEncoder(), &h, pieces, u, false)
	if strings.Contains(string(body), "not here") || strings.Contains(string(body), `"role"`) {
		t.Errorf("completion stream:\n%s", body)
	}
	apitest.Check(t, api.Completions, body, false, apitest.Want{Text: "one two", Events: 2, Done: true, Usage: u})
}

// The in-stream error chunk is a server error with the server's words;
// a credential quoted in them is redacted.
func TestEncoderError(t *testing.T) {
	e := chat.NewEncoder()
	body := e.Begin(nil, &head)
	body = e.Text(body, []byte("a"), 1)
	body = e.Error(body, "InternalServerError", "out of KV cache; key sk-abcdefghijklmnopqrstuvwxyz refused")
	apitest.Check(t, api.Chat, body, false, apitest.Want{Text: "a", Events: 2, Kind: trace.ErrMalformed,
		MsgHas: "event 3: server error: out of KV cache; key <redacted> refused", Usage: api.NoUsage})
}

// Another API's answer to a chat request is wrong_api, not a truncated
// stream: Responses events, Anthropic events, a Responses body.
func TestWrongAPI(t *testing.T) {
	responses := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[],\"usage\":null}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n"
	apitest.Check(t, api.Chat, []byte(responses), false, apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "event 1: a responses answer where chat was asked for", Usage: api.NoUsage})
	messages := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
	apitest.Check(t, api.Chat, []byte(messages), false, apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a messages answer where chat was asked for", Usage: api.NoUsage})
	apitest.Check(t, api.Completions, []byte(`{"id":"resp_1","object":"response","status":"completed","output":[]}`), true,
		apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a responses answer where completions was asked for", Usage: api.NoUsage})
}

func TestNoAlloc(t *testing.T) {
	h := head
	h.Completion, h.ContinuousUsage = 40, true
	var pieces []apitest.Piece
	for range 20 {
		pieces = append(pieces, apitest.Piece{Kind: apitest.Reasoning, Text: " r", Tokens: 1}, apitest.Piece{Kind: apitest.Text, Text: " t", Tokens: 1})
	}
	apitest.NoAlloc(t, api.Chat, apitest.Encode(chat.NewEncoder(), &h, pieces, api.Usage{Prompt: 12, Completion: 40, Cached: 8, Reasoning: 20}, false), 1500)
	e := chat.NewEncoder()
	buf := make([]byte, 0, 16<<10)
	text := []byte("word")
	if n := testing.AllocsPerRun(50, func() {
		b := e.Begin(buf[:0], &h)
		for range 20 {
			b = e.Text(b, text, 1)
		}
		b = e.End(b, api.Usage{Prompt: 1, Completion: 20, Cached: 0, Reasoning: -1})
		e.Done(b)
	}); n != 0 {
		t.Fatalf("encoder: %v allocations per stream", n)
	}
}

// Media tokens: the mock writes vLLM's split (prompt_tokens_details.
// multimodal_tokens, the kinds the request had) and the decoder reads it
// back into the record's columns by kind; OpenAI's audio_tokens reads as
// audio. A usage without a split reports none.
func TestMediaTokensInUsage(t *testing.T) {
	pieces := []apitest.Piece{{Kind: apitest.Text, Text: "hi", Tokens: 1}}
	h := head
	h.IncludeUsage = true
	u := api.Usage{Prompt: 600, Completion: 6, Cached: 0, Reasoning: -1, Media: api.MediaTokens{Image: 512, Audio: 13}}
	body := apitest.Encode(chat.NewEncoder(), &h, pieces, u, false)
	if !strings.Contains(string(body), `"prompt_tokens_details":{"cached_tokens":0,"multimodal_tokens":{"image":512,"audio":13}}`) {
		t.Errorf("no vLLM media split in the usage:\n%s", body)
	}
	apitest.Check(t, api.Chat, body, false, apitest.Want{Text: "hi", Events: 3, Done: true, Usage: u})
	_, r := apitest.Parse(t, api.Chat, body, len(body), false)
	if r.ImageTokens != 512 || r.AudioTokens != 13 || r.VideoTokens != 0 {
		t.Errorf("record media tokens image %d video %d audio %d, want 512 0 13", r.ImageTokens, r.VideoTokens, r.AudioTokens)
	}
	u.Media = api.MediaTokens{}
	if body := apitest.Encode(chat.NewEncoder(), &h, pieces, u, false); strings.Contains(string(body), "multimodal_tokens") {
		t.Errorf("a usage without media tokens names them:\n%s", body)
	}

	openai := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":90,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":70}}}\n\ndata: [DONE]\n\n")
	_, r = apitest.Parse(t, api.Chat, openai, len(openai), false)
	if r.AudioTokens != 70 || r.ImageTokens != 0 || r.PromptTokens != 90 {
		t.Errorf("OpenAI's audio_tokens: record audio %d image %d prompt %d, want 70 0 90", r.AudioTokens, r.ImageTokens, r.PromptTokens)
	}
}
