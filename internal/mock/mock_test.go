package mock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fastConfig is a quick model: 5 ms prefill, 2 ms per token, no jitter.
// The mock's own tests keep it (mocktest, which imports this package,
// cannot be imported here): unlike mocktest.Fast it charges per prompt
// token, which these tests look at.
func fastConfig() Config {
	cfg := DefaultConfig()
	cfg.KeepLog = true
	cfg.Latency.PrefillBase = Duration(5 * time.Millisecond)
	cfg.Latency.PrefillPerToken = Duration(10 * time.Microsecond)
	cfg.Latency.DecodeBase = Duration(2 * time.Millisecond)
	cfg.Latency.DecodePerSeq = 0
	cfg.Latency.JitterCV = 0
	return cfg
}

func startMock(t *testing.T, edit func(*Config)) *Server {
	t.Helper()
	cfg := fastConfig()
	if edit != nil {
		edit(&cfg)
	}
	srv, err := Start(cfg)
	if err != nil {
		t.Fatalf("starting the mock: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the mock: %v", err)
		}
	})
	return srv
}

func post(t *testing.T, srv *Server, path string, body any, hdr map[string]string) *http.Response {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest("POST", srv.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sse reads a stream into its data payloads; done reports data: [DONE].
// err is the body read error, if the stream broke.
func sse(resp *http.Response) (events []string, done bool, err error) {
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		d := strings.TrimPrefix(line, "data: ")
		if d == "[DONE]" {
			done = true
			continue
		}
		events = append(events, d)
	}
	return events, done, sc.Err()
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func parseChunks(t *testing.T, events []string) []chunk {
	t.Helper()
	out := make([]chunk, len(events))
	for i, e := range events {
		if err := json.Unmarshal([]byte(e), &out[i]); err != nil {
			t.Fatalf("event %d %q: %v", i, e, err)
		}
	}
	return out
}

func chatBody(maxTokens int, stream bool, msgs ...string) map[string]any {
	var m []map[string]string
	for i := 0; i+1 < len(msgs); i += 2 {
		m = append(m, map[string]string{"role": msgs[i], "content": msgs[i+1]})
	}
	return map[string]any{"model": "m", "messages": m, "max_tokens": maxTokens, "ignore_eos": true, "stream": stream,
		"stream_options": map[string]any{"include_usage": true}}
}

// waitFor polls cond until it holds; the bound is a hang guard only.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func entryByID(t *testing.T, srv *Server, id string) LogEntry {
	t.Helper()
	for _, e := range srv.Log() {
		if e.RequestID == id {
			return e
		}
	}
	t.Fatalf("no log entry for request %q in %d entries", id, len(srv.Log()))
	return LogEntry{}
}

// Prompt tokens by ApproxTokens: be(1) brief(2) hello(2) there(2) friend(2) = 9.
func TestChatStreamSequenceAndUsage(t *testing.T) {
	srv := startMock(t, nil)
	body := chatBody(5, true, "system", "be brief", "user", "hello there friend")
	resp := post(t, srv, "/v1/chat/completions", body, map[string]string{"X-Request-Id": "req-1"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := resp.Header.Get("X-Request-Id"); got != "req-1" {
		t.Fatalf("X-Request-Id = %q, want req-1", got)
	}
	events, done, err := sse(resp)
	if err != nil || !done {
		t.Fatalf("stream err %v, done %v", err, done)
	}
	cs := parseChunks(t, events)
	if len(cs) != 7 { // role, 5 tokens, usage
		t.Fatalf("%d events, want 7: %q", len(cs), events)
	}
	if r := cs[0].Choices[0].Delta.Role; r == nil || *r != "assistant" || *cs[0].Choices[0].Delta.Content != "" {
		t.Fatalf("first chunk is not role-only: %s", events[0])
	}
	var text strings.Builder
	for i, c := range cs[1:6] {
		if c.Object != "chat.completion.chunk" || c.ID != "chatcmpl-req-1" || c.Model != "m" || c.Usage != nil {
			t.Fatalf("chunk %d: %s", i+1, events[i+1])
		}
		text.WriteString(*c.Choices[0].Delta.Content)
		fr := c.Choices[0].FinishReason
		if (i == 4) != (fr != nil) || (fr != nil && *fr != "length") {
			t.Fatalf("chunk %d finish_reason: %s", i+1, events[i+1])
		}
	}
	u := cs[6]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 9 || u.Usage.CompletionTokens != 5 || u.Usage.TotalTokens != 14 {
		t.Fatalf("usage chunk: %s", events[6])
	}
	hash := HashMessages([]Message{{"system", "be brief"}, {"user", "hello there friend"}})
	want, _ := GeneratedText(srv.cfg.Seed, hash, 5)
	if text.String() != want {
		t.Fatalf("content %q, want %q", text.String(), want)
	}
	e := entryByID(t, srv, "req-1")
	if e.Outcome != OutcomeOK || e.Status != 200 || e.MessagesHash != hash || e.Messages != 2 || e.PromptTokens != 9 || e.CompletionTokens != 5 {
		t.Fatalf("log entry: %+v", e)
	}
	if got := e.EventTokens; len(got) != 6 || got[0] != 0 || got[1] != 1 || len(e.EventMonoNs) != 6 || len(e.EventLatenessNs) != 6 {
		t.Fatalf("event lists: tokens %v, %d stamps", got, len(e.EventMonoNs))
	}
	for i := 1; i < len(e.EventMonoNs); i++ {
		if e.EventMonoNs[i] < e.EventMonoNs[i-1] {
			t.Fatalf("event stamps not monotonic: %v", e.EventMonoNs)
		}
	}
	if !(e.ArrivalMonoNs <= e.HeadersMonoNs && e.HeadersMonoNs <= e.AdmitMonoNs && e.AdmitMonoNs <= e.EventMonoNs[0]) {
		t.Fatalf("arrival %d, headers %d, admit %d, first event %d out of order", e.ArrivalMonoNs, e.HeadersMonoNs, e.AdmitMonoNs, e.EventMonoNs[0])
	}
}

func TestGeneratedIDAndTokensPerEvent(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Latency.TokensPerEvent = 3 })
	resp := post(t, srv, "/v1/chat/completions", chatBody(10, true, "user", "count"), nil)
	id := resp.Header.Get("X-Request-Id")
	if id == "" {
		t.Fatal("no generated X-Request-Id")
	}
	if _, done, err := sse(resp); err != nil || !done {
		t.Fatalf("stream err %v, done %v", err, done)
	}
	e := entryByID(t, srv, id)
	want := []int32{0, 1, 3, 3, 3}
	if len(e.EventTokens) != len(want) {
		t.Fatalf("event tokens %v, want %v", e.EventTokens, want)
	}
	for i := range want {
		if e.EventTokens[i] != want[i] {
			t.Fatalf("event tokens %v, want %v", e.EventTokens, want)
		}
	}
}

func TestCompletionsStreamContinuousUsage(t *testing.T) {
	srv := startMock(t, nil)
	body := map[string]any{"model": "m", "prompt": "one two three four", "max_tokens": 4, "ignore_eos": true, "stream": true,
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}
	resp := post(t, srv, "/v1/completions", body, nil)
	events, done, err := sse(resp)
	if err != nil || !done {
		t.Fatalf("stream err %v, done %v", err, done)
	}
	cs := parseChunks(t, events)
	if len(cs) != 5 { // 4 tokens + usage, no role chunk
		t.Fatalf("%d events: %q", len(cs), events)
	}
	var text strings.Builder
	for i, c := range cs[:4] {
		if c.Object != "text_completion" || c.Choices[0].Text == nil || c.Usage == nil || c.Usage.CompletionTokens != i+1 || c.Usage.PromptTokens != 5 { // one two three four: 1+1+2+1 approx tokens
			t.Fatalf("chunk %d: %s", i, events[i])
		}
		text.WriteString(*c.Choices[0].Text)
	}
	if cs[4].Usage.CompletionTokens != 4 || len(cs[4].Choices) != 0 {
		t.Fatalf("usage chunk: %s", events[4])
	}
	want, _ := GeneratedText(srv.cfg.Seed, HashMessages([]Message{{"prompt", "one two three four"}}), 4)
	if text.String() != want {
		t.Fatalf("text %q, want %q", text.String(), want)
	}
}

func TestNonStreaming(t *testing.T) {
	srv := startMock(t, nil)
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi you"}}, "max_completion_tokens": 3, "ignore_eos": true}},
		{"/v1/completions", map[string]any{"model": "x", "prompt": "hi you", "max_tokens": 3, "ignore_eos": true}},
	} {
		resp := post(t, srv, tc.path, tc.body, nil)
		var got struct {
			Object  string `json:"object"`
			Choices []struct {
				Message      struct{ Role, Content string } `json:"message"`
				Text         string                         `json:"text"`
				FinishReason string                         `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %v", tc.path, resp.StatusCode, err)
		}
		text := got.Choices[0].Text + got.Choices[0].Message.Content
		if got.Usage.PromptTokens != 2 || got.Usage.CompletionTokens != 3 || got.Choices[0].FinishReason != "length" || len(strings.Fields(text)) != 3 {
			t.Fatalf("%s: %+v", tc.path, got)
		}
	}
}

func TestStopFinishHasNoTextForEOS(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Latency.OutputMean, c.Latency.OutputCV = 4, 0 })
	body := chatBody(100, true, "user", "hi")
	body["ignore_eos"] = false
	resp := post(t, srv, "/v1/chat/completions", body, nil)
	events, _, _ := sse(resp)
	cs := parseChunks(t, events)
	last := cs[len(cs)-2] // before the usage chunk
	if fr := last.Choices[0].FinishReason; fr == nil || *fr != "stop" || *last.Choices[0].Delta.Content != "" {
		t.Fatalf("last content chunk: %s", events[len(events)-2])
	}
	if u := cs[len(cs)-1].Usage; u.CompletionTokens != 4 {
		t.Fatalf("completion tokens %d, want 4", u.CompletionTokens)
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	srv := startMock(t, nil)
	post(t, srv, "/v1/chat/completions", chatBody(3, false, "user", "a b c"), nil)
	for path, want := range map[string][]string{
		"/health":    nil,
		"/v1/models": {`"id":"tracekit-mock"`, `"object":"list"`},
		"/metrics": {"vllm:num_requests_running{", "vllm:prompt_tokens_total{model_name=\"tracekit-mock\"} 3",
			"vllm:generation_tokens_total{model_name=\"tracekit-mock\"} 3", "vllm:prefix_cache_hits_total",
			"tracekit_mock_event_lateness_seconds{model_name=\"tracekit-mock\",quantile=\"0.99\"}"},
	} {
		resp, err := http.Get(srv.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Fatalf("%s lacks %q:\n%s", path, w, b)
			}
		}
	}
}

func TestBadRequests(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Latency.MaxModelLen = 100 })
	cases := []struct {
		name, path, body, want string
		status                 int
	}{
		{"bad json", "/v1/chat/completions", `{"messages": [`, "not valid JSON", 400},
		{"empty", "/v1/chat/completions", ``, "empty", 400},
		{"missing messages", "/v1/chat/completions", `{"model":"m"}`, `"messages" is required`, 400},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, "at least one", 400},
		{"no role", "/v1/chat/completions", `{"messages":[{"content":"x"}]}`, `"role" is required`, 400},
		{"wrong type", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":"5"}`, `"max_tokens": expected an integer`, 400},
		{"content type", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, "messages[0].content", 400},
		{"part not an object", "/v1/chat/completions", `{"messages":[{"role":"user","content":["x"]}]}`, "messages[0].content: expected a string or an array of content parts", 400},
		{"part text type", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content: expected a string or an array of content parts", 400},
		{"audio data type", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":1,"format":"wav"}}]}]}`, "messages[0].content: expected", 400},
		{"responses item not an object", "/v1/responses", `{"max_output_tokens":3,"input":[1]}`, "input: item 0 is not an object", 400},
		{"responses input type", "/v1/responses", `{"max_output_tokens":3,"input":5}`, "input: expected a string or an array of input items", 400},
		{"responses part text type", "/v1/responses", `{"max_output_tokens":3,"input":[{"role":"user","content":[{"type":"input_text","text":[]}]}]}`, "input[0].content: expected a string or an array of content parts", 400},
		{"data after body", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]} {}`, "data after the JSON object", 400},
		{"zero max", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, "at least 1", 400},
		{"n", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":2}`, "n=2", 400},
		{"too long", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":100}`, "maximum context length is 100", 400},
		{"no prompt", "/v1/completions", `{"model":"m"}`, `"prompt" is required`, 400},
		{"batched prompt", "/v1/completions", `{"prompt":["a","b"]}`, "batched", 400},
		{"bad fault", "/v1/completions", `{"prompt":"a"}`, "X-Tracekit-Fault", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.name == "bad fault" {
				hdr[FaultHeader] = "explode"
			}
			resp := post(t, srv, tc.path, tc.body, hdr)
			var got struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("error body: %v", err)
			}
			if resp.StatusCode != tc.status || got.Error.Code != tc.status || got.Error.Type != "BadRequestError" || !strings.Contains(got.Error.Message, tc.want) {
				t.Fatalf("status %d, body %+v, want %d with %q", resp.StatusCode, got.Error, tc.status, tc.want)
			}
		})
	}
	// The server still answers after all of them.
	resp := post(t, srv, "/v1/chat/completions", chatBody(2, false, "user", "x"), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d after bad requests", resp.StatusCode)
	}
	var bad int
	for _, e := range srv.Log() {
		if e.Outcome == OutcomeBadRequest {
			bad++
		}
	}
	if bad != len(cases) {
		t.Fatalf("%d bad_request entries, want %d", bad, len(cases))
	}
}

func TestStrictModel(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.StrictModel = true })
	resp := post(t, srv, "/v1/chat/completions", chatBody(2, false, "user", "x"), nil)
	if resp.StatusCode != 404 {
		t.Fatalf("status %d, want 404 for an unknown model", resp.StatusCode)
	}
}

func TestDeterministicOutputLength(t *testing.T) {
	lengths := func(seed int64) []int32 {
		srv := startMock(t, func(c *Config) {
			c.Seed = seed
			c.Latency.OutputMean = 6
			c.Latency.OutputCV = 0.8
			c.Latency.DecodeBase = 0
		})
		var out []int32
		for i := range 6 {
			body := chatBody(50, false, "user", "same prompt")
			body["ignore_eos"] = false
			id := "fixed-" + string(rune('a'+i))
			post(t, srv, "/v1/chat/completions", body, map[string]string{"X-Request-Id": id})
			out = append(out, entryByID(t, srv, id).CompletionTokens)
		}
		return out
	}
	a, b, c := lengths(7), lengths(7), lengths(8)
	if !equal(a, b) {
		t.Fatalf("same seed, different lengths: %v vs %v", a, b)
	}
	if equal(a, c) {
		t.Fatalf("different seeds, same lengths %v", a)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
