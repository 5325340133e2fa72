package mock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// readAs reads a response of API name through tracekit's own parser (the
// api package's decoder under record.Stream) and returns it with its
// record and verdict.
func readAs(t *testing.T, name api.Name, resp *http.Response, stream bool) (*record.Stream, trace.Record) {
	t.Helper()
	s := record.NewStream(ApproxTokens)
	if err := s.SetAPI(name); err != nil {
		t.Fatal(err)
	}
	var err error
	if stream {
		err = s.ReadBody(resp.Body, make([]byte, 4<<10), func() int64 { return 1 })
	} else {
		var b []byte
		if b, err = io.ReadAll(resp.Body); err == nil {
			s.FeedJSON(b, 1)
		}
	}
	var rec trace.Record
	s.Fill(&rec)
	rec.ErrorKind, rec.ErrorMessage = s.Verdict()
	if err != nil && rec.ErrorKind == "" {
		rec.ErrorKind, rec.ErrorMessage = trace.ErrStreamTruncated, err.Error()
	}
	return s, rec
}

// genBody is a request to a generating API for maxTokens tokens of answer,
// ignore_eos so the length is exact: the system prompt "be brief" and the
// user's "hello there friend", in the API's fields.
func genBody(name api.Name, maxTokens int, stream bool) map[string]any {
	switch name {
	case api.Completions:
		return map[string]any{"prompt": "hello there friend", "max_tokens": maxTokens, "ignore_eos": true, "stream": stream,
			"stream_options": map[string]any{"include_usage": true}}
	case api.Responses:
		return map[string]any{"instructions": "be brief", "input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hello there friend"}}}},
			"max_output_tokens": maxTokens, "ignore_eos": true, "stream": stream}
	case api.Messages:
		return map[string]any{"system": "be brief", "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hello there friend"}}}},
			"max_tokens": maxTokens, "ignore_eos": true, "stream": stream}
	}
	return map[string]any{"messages": []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": "hello there friend"}},
		"max_tokens": maxTokens, "ignore_eos": true, "stream": stream, "stream_options": map[string]any{"include_usage": true}}
}

var apiPaths = map[api.Name]string{api.Chat: "/v1/chat/completions", api.Completions: "/v1/completions", api.Responses: "/v1/responses",
	api.Messages: "/v1/messages", api.Embeddings: "/v1/embeddings", api.Rerank: "/v1/rerank", api.Score: "/v1/score"}

// wantWords is the generated text of words [from, to) of the answer
// (reasoning false) or of the reasoning, for the prompt hashed as hash.
func wantWords(seed int64, hash string, reasoning bool, from, to int) string {
	h, _ := hexHash(hash)
	if reasoning {
		h ^= reasoningSalt
	}
	var b strings.Builder
	for i := from; i < to; i++ {
		b.WriteString(" " + word(seed, h, i))
	}
	return b.String()
}

// Every generating API, streamed and not, with and without a reasoning
// phase: the api package's decoder reads back the planned answer text,
// the reasoning text, the usage; a stream lists the events the log lists,
// reasoning first; the log names the API.
func TestGeneratingEndpoints(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Latency.PrefixCacheTokens = 0 })
	chatHash := HashMessages([]Message{{"system", "be brief"}, {"user", "hello there friend"}})
	for _, name := range []api.Name{api.Chat, api.Completions, api.Responses, api.Messages} {
		for _, stream := range []bool{true, false} {
			for _, reasoning := range []int{0, 3} {
				id := fmt.Sprintf("%s-%v-%d", name, stream, reasoning)
				hdr := map[string]string{"X-Request-Id": id, ReasoningHeader: fmt.Sprint(reasoning)}
				resp := post(t, srv, apiPaths[name], genBody(name, 7, stream), hdr)
				if resp.StatusCode != 200 {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("%s: HTTP %d %s", id, resp.StatusCode, b)
				}
				s, rec := readAs(t, name, resp, stream)
				if rec.ErrorKind != "" {
					t.Fatalf("%s: %s %s", id, rec.ErrorKind, rec.ErrorMessage)
				}
				e := entryByID(t, srv, id)
				hash, prompt := chatHash, int64(9) // be(1) brief(2) hello(2) there(2) friend(2)
				if name == api.Completions {
					reasoning, hash, prompt = 0, HashMessages([]Message{{"prompt", "hello there friend"}}), 6
				}
				if e.Endpoint != string(name) || e.Outcome != OutcomeOK || e.MessagesHash != hash || int64(e.PromptTokens) != prompt ||
					e.CompletionTokens != 7 || int(e.ReasoningTokens) != reasoning || e.Stream != stream {
					t.Fatalf("%s: log entry %+v", id, e)
				}
				if got, want := s.Text(), wantWords(srv.cfg.Seed, hash, false, 0, 7-reasoning); got != want {
					t.Errorf("%s: text %q, want %q", id, got, want)
				}
				if got, want := s.Reasoning(), wantWords(srv.cfg.Seed, hash, true, 0, reasoning); got != want {
					t.Errorf("%s: reasoning %q, want %q", id, got, want)
				}
				u := s.Usage()
				wantReasoning := int64(-1)
				if reasoning > 0 || (name == api.Responses) { // Responses always reports it
					wantReasoning = int64(reasoning)
				}
				if u.Prompt != prompt || u.Completion != 7 || u.Reasoning != wantReasoning {
					t.Errorf("%s: usage %+v, want prompt %d, completion 7, reasoning %d", id, u, prompt, wantReasoning)
				}
				if !stream {
					if len(e.EventMonoNs) != 0 || e.FirstAnswerEvent != 0 {
						t.Errorf("%s: a body logged events %v, first answer %d", id, e.EventTokens, e.FirstAnswerEvent)
					}
					continue
				}
				role := 0
				if name == api.Chat {
					role = 1
				}
				if len(rec.EventNs) != len(e.EventMonoNs) || len(e.EventMonoNs) != role+7 || int(e.FirstAnswerEvent) != role+reasoning {
					t.Errorf("%s: parser %d events, log %d (tokens %v), first answer %d", id, len(rec.EventNs), len(e.EventMonoNs), e.EventTokens, e.FirstAnswerEvent)
				}
			}
		}
	}
}

// Reasoning comes as its own phase: drawn from reasoning_mean, capped by a
// Messages thinking budget, none when a request turns it off; with
// several tokens per event no event holds both reasoning and answer.
func TestReasoningPhase(t *testing.T) {
	srv := startMock(t, func(c *Config) {
		c.Latency.ReasoningMean, c.Latency.ReasoningCV, c.Latency.TokensPerEvent = 5, 0, 4
	})
	for _, c := range []struct {
		name   api.Name
		edit   func(map[string]any)
		want   int
		tokens []int32
	}{
		{api.Chat, nil, 5, []int32{0, 1, 4, 4, 3}}, // role, reasoning 1+4, answer 4+3
		{api.Chat, func(b map[string]any) { b["reasoning_effort"] = "none" }, 0, nil},
		{api.Responses, func(b map[string]any) { b["reasoning"] = map[string]any{"effort": "none"} }, 0, nil},
		{api.Messages, func(b map[string]any) { b["thinking"] = map[string]any{"type": "enabled", "budget_tokens": 2} }, 2, []int32{1, 1, 4, 4, 2}},
		{api.Messages, func(b map[string]any) { b["thinking"] = map[string]any{"type": "disabled"} }, 0, nil},
		{api.Completions, nil, 0, nil},
	} {
		id := fmt.Sprintf("%s-%d", c.name, c.want)
		body := genBody(c.name, 12, true)
		if c.edit != nil {
			c.edit(body)
		}
		resp := post(t, srv, apiPaths[c.name], body, map[string]string{"X-Request-Id": id})
		s, rec := readAs(t, c.name, resp, true)
		e := entryByID(t, srv, id)
		if rec.ErrorKind != "" || int(e.ReasoningTokens) != c.want || len(strings.Fields(s.Reasoning())) != c.want || e.CompletionTokens != 12 {
			t.Fatalf("%s: %s, log reasoning %d, decoded %q", id, rec.ErrorKind, e.ReasoningTokens, s.Reasoning())
		}
		if c.tokens != nil && fmt.Sprint(e.EventTokens) != fmt.Sprint(c.tokens) {
			t.Errorf("%s: event tokens %v, want %v", id, e.EventTokens, c.tokens)
		}
	}
}

// previous_response_id continues the stored transcript: the prompt is the
// new instructions, the earlier input and answer, then the new input (so
// the prefix cache hits the earlier turn); an unknown id, or one stored
// with store false or evicted, is a 404 in OpenAI's error shape.
func TestResponsesState(t *testing.T) {
	srv := startMock(t, nil)
	turn := func(id string, body map[string]any) (*http.Response, LogEntry) {
		resp := post(t, srv, "/v1/responses", body, map[string]string{"X-Request-Id": id})
		if resp.StatusCode == 200 {
			readAs(t, api.Responses, resp, true)
		}
		return resp, entryByID(t, srv, id)
	}
	_, first := turn("t1", map[string]any{"instructions": "be brief", "input": "hello there", "max_output_tokens": 4, "ignore_eos": true, "stream": true})
	answer := wantWords(srv.cfg.Seed, first.MessagesHash, false, 0, 4)
	_, second := turn("t2", map[string]any{"instructions": "be kind", "input": []any{map[string]any{"role": "user", "content": "and more"}},
		"previous_response_id": "resp_t1", "max_output_tokens": 4, "ignore_eos": true, "stream": true})
	want := HashMessages([]Message{{"system", "be kind"}, {"user", "hello there"}, {"assistant", answer}, {"user", "and more"}})
	if second.Outcome != OutcomeOK || second.MessagesHash != want || second.Messages != 4 || second.PromptTokens != 2+4+4+2 {
		t.Fatalf("second turn %+v, want hash %s", second, want)
	}
	// A third turn without instructions continues the second's transcript.
	answer2 := wantWords(srv.cfg.Seed, second.MessagesHash, false, 0, 4)
	_, third := turn("t3", map[string]any{"input": "go on", "previous_response_id": "resp_t2", "max_output_tokens": 2, "ignore_eos": true})
	want = HashMessages([]Message{{"user", "hello there"}, {"assistant", answer}, {"user", "and more"}, {"assistant", answer2}, {"user", "go on"}})
	if third.MessagesHash != want {
		t.Fatalf("third turn hash %s, want %s", third.MessagesHash, want)
	}
	turn("nostore", map[string]any{"input": "x", "max_output_tokens": 2, "store": false})
	for _, prev := range []string{"resp_nope", "resp_nostore", "t1"} {
		resp, e := turn("after-"+prev, map[string]any{"input": "x", "previous_response_id": prev, "max_output_tokens": 2})
		var body struct {
			Error struct {
				Message string `json:"message"`
				Param   string `json:"param"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 404 || body.Error.Code != 404 ||
			body.Error.Param != "previous_response_id" || !strings.Contains(body.Error.Message, prev) || e.Outcome != OutcomeBadRequest {
			t.Errorf("previous %q: HTTP %d %+v (%v), log %s", prev, resp.StatusCode, body, err, e.Outcome)
		}
	}
}

// The store is bounded: the least recently used transcript goes first.
func TestResponseStoreEvicts(t *testing.T) {
	s := newResponseStore(size("a", []Message{{"user", "xx"}}) * 2)
	s.put("a", []Message{{"user", "xx"}})
	s.put("b", []Message{{"user", "yy"}})
	s.get("a") // a is now the most recent
	s.put("c", []Message{{"user", "zz"}})
	if _, ok := s.get("b"); ok {
		t.Error("b, least recently used, is still stored")
	}
	for _, id := range []string{"a", "c"} {
		if _, ok := s.get(id); !ok {
			t.Errorf("%s was evicted", id)
		}
	}
	s.put("big", []Message{{"user", strings.Repeat("w", 1000)}})
	if _, ok := s.get("big"); ok || s.bytes > s.limit {
		t.Errorf("a transcript over the limit was stored (%d of %d bytes)", s.bytes, s.limit)
	}
	none := newResponseStore(0)
	none.put("a", nil)
	if _, ok := none.get("a"); ok {
		t.Error("a store of 0 bytes kept a transcript")
	}
}

// Messages errors are Anthropic's shape; strict_anthropic requires the
// anthropic-version header (400) and a key (401); by default neither is
// checked, as vLLM does not.
func TestMessagesErrorsAndHeaders(t *testing.T) {
	anthropicError := func(t *testing.T, resp *http.Response, status int, typ, msg string) {
		t.Helper()
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != status || body.Type != "error" ||
			body.Error.Type != typ || !strings.Contains(body.Error.Message, msg) {
			t.Errorf("HTTP %d %+v (%v), want %d %s %q", resp.StatusCode, body, err, status, typ, msg)
		}
	}
	lax := startMock(t, nil)
	body := genBody(api.Messages, 2, false)
	if r := post(t, lax, "/v1/messages", body, nil); r.StatusCode != 200 || r.Header.Get("Request-Id") == "" {
		t.Errorf("no headers, not strict: HTTP %d, request-id %q", r.StatusCode, r.Header.Get("Request-Id"))
	}
	noMax := genBody(api.Messages, 2, false)
	delete(noMax, "max_tokens")
	anthropicError(t, post(t, lax, "/v1/messages", noMax, nil), 400, "invalid_request_error", "max_tokens")
	anthropicError(t, post(t, lax, "/v1/messages", `{"max_tokens": 3, "messages": []}`, nil), 400, "invalid_request_error", "at least one message")
	anthropicError(t, post(t, lax, "/v1/messages", `{"max_tokens":3,"messages":[{"role":"user","content":["x"]}]}`, nil), 400, "invalid_request_error", "messages.0.content: expected a string or an array of content blocks")
	anthropicError(t, post(t, lax, "/v1/messages", `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":7}}]}]}`, nil), 400, "invalid_request_error", "messages.0.content: expected")
	anthropicError(t, post(t, lax, "/v1/messages", `{"max_tokens":3,"system":[{"type":"text","text":1}],"messages":[{"role":"user","content":"x"}]}`, nil), 400, "invalid_request_error", "system: expected")
	anthropicError(t, post(t, lax, "/v1/messages", body, map[string]string{FaultHeader: "status=429"}), 429, "rate_limit_error", "injected fault")

	strict := startMock(t, func(c *Config) { c.StrictAnthropic = true })
	anthropicError(t, post(t, strict, "/v1/messages", body, map[string]string{"X-Api-Key": "k"}), 400, "invalid_request_error", "anthropic-version")
	anthropicError(t, post(t, strict, "/v1/messages", body, map[string]string{"Anthropic-Version": "2023-06-01"}), 401, "authentication_error", "x-api-key")
	r := post(t, strict, "/v1/messages", body, map[string]string{"Anthropic-Version": "2023-06-01", "X-Api-Key": "secret-key"})
	if r.StatusCode != 200 {
		t.Errorf("both headers: HTTP %d", r.StatusCode)
	}
	for _, e := range strict.Log() {
		if strings.Contains(fmt.Sprintf("%+v", e), "secret-key") {
			t.Errorf("the key reached the log: %+v", e)
		}
	}
}

// The non-generating APIs: one body each, read back by the api package's
// decoders with the item count and the prompt tokens the log records;
// rerank is served on its three paths, sorted, cut at top_n, with the
// documents when asked; embeddings in float or base64, of the dimensions
// asked.
func TestPoolEndpoints(t *testing.T) {
	srv := startMock(t, nil)
	for _, c := range []struct {
		name         api.Name
		path         string
		body         string
		items, tok   int64
		has, hasNot  string
		status       int
		errorMessage string
	}{
		{api.Embeddings, "/v1/embeddings", `{"input":"one two three"}`, 1, 4, `"embedding":[`, "", 200, ""},
		{api.Embeddings, "/v1/embeddings", `{"input":["one two","three"],"encoding_format":"base64","dimensions":4}`, 2, 4, `"embedding":"`, "", 200, ""},
		{api.Embeddings, "/embeddings", `{"input":[[1,2,3],[4,5]]}`, 2, 5, "", "", 200, ""},
		{api.Embeddings, "/v1/embeddings", `{"input":[]}`, 0, 0, "", "", 400, "must not be empty"},
		{api.Embeddings, "/v1/embeddings", `{"input":"x","encoding_format":"bytes"}`, 0, 0, "", "", 400, "encoding_format"},
		{api.Rerank, "/v1/rerank", `{"query":"q","documents":["a","b b","c"]}`, 3, 2 + 3 + 2, `"document":{"text":`, "", 200, ""},
		{api.Rerank, "/rerank", `{"query":"q","documents":["a",{"text":"b"},"c"],"top_n":2,"return_documents":false}`, 2, 6, "", `"document"`, 200, ""},
		{api.Rerank, "/v2/rerank", `{"query":{"text":"q"},"documents":["a"]}`, 1, 2, "", "", 200, ""},
		{api.Rerank, "/v1/rerank", `{"query":"q","documents":[]}`, 0, 0, "", "", 400, "documents"},
		{api.Score, "/v1/score", `{"text_1":"q","text_2":["a","b"]}`, 2, 4, `"object":"score"`, "", 200, ""},
		{api.Score, "/score", `{"text_1":["q","r"],"text_2":["a","b"]}`, 2, 4, "", "", 200, ""},
		{api.Score, "/v1/score", `{"text_1":["q","r"],"text_2":["a","b","c"]}`, 0, 0, "", "", 400, "text_1 has 2"},
	} {
		id := c.path + " " + c.body
		resp := post(t, srv, c.path, c.body, map[string]string{"X-Request-Id": id})
		raw, _ := io.ReadAll(resp.Body)
		e := entryByID(t, srv, id)
		if resp.StatusCode != c.status || e.Endpoint != string(c.name) || !strings.Contains(string(raw), c.errorMessage) {
			t.Errorf("%s: HTTP %d, endpoint %q: %s", id, resp.StatusCode, e.Endpoint, raw)
			continue
		}
		if c.status != 200 {
			continue
		}
		s := record.NewStream(nil)
		s.SetAPI(c.name)
		s.FeedJSON(raw, 1)
		if k, msg := s.Verdict(); k != "" || s.Items() != c.items || s.Usage().Prompt != c.tok {
			t.Errorf("%s: %s %s, %d items, usage %+v", id, k, msg, s.Items(), s.Usage())
		}
		if int64(e.Items) != c.items || int64(e.PromptTokens) != c.tok || e.Outcome != OutcomeOK || e.PlannedTTFTNs < int64(srv.cfg.Latency.prefill(int(c.tok))) {
			t.Errorf("%s: log %+v", id, e)
		}
		if !strings.Contains(string(raw), c.has) || (c.hasNot != "" && strings.Contains(string(raw), c.hasNot)) {
			t.Errorf("%s: body %s", id, raw)
		}
		if c.name == api.Embeddings && strings.Contains(c.body, "base64") {
			var b struct {
				Data []struct{ Embedding string } `json:"data"`
			}
			json.Unmarshal(raw, &b)
			if len(b.Data) != 2 || len(b.Data[0].Embedding) != 24 { // 4 float32 = 16 bytes = 24 base64 characters
				t.Errorf("%s: base64 embeddings %+v", id, b.Data)
			}
		}
		if c.name == api.Rerank {
			var b struct {
				Results []struct {
					Score float64 `json:"relevance_score"`
				} `json:"results"`
			}
			json.Unmarshal(raw, &b)
			for i := 1; i < len(b.Results); i++ {
				if b.Results[i].Score > b.Results[i-1].Score {
					t.Errorf("%s: results not sorted by score: %s", id, raw)
				}
			}
		}
	}
}

// Faults act on every API in its own terms: a disconnect cuts a stream
// before its terminal event, the error fault is the API's error event (a
// 500 error body for a body), nodone drops the terminal event, json
// answers a stream request with the API's body; the log's events are the
// events the client read.
func TestFaultsPerAPI(t *testing.T) {
	srv := startMock(t, nil)
	for _, name := range []api.Name{api.Chat, api.Completions, api.Responses, api.Messages} {
		for _, c := range []struct {
			fault   string
			kind    trace.ErrorKind
			msgHas  string
			events  int // logged events: N of a cut, else every one (-1; chat adds its role chunk)
			outcome string
		}{
			{"disconnect=3", trace.ErrStreamTruncated, "", 3, OutcomeFault},
			{"error@2", trace.ErrMalformed, "injected fault error@2", 2, OutcomeFault},
			{"malformed@2", trace.ErrMalformed, "not a valid JSON", -1, OutcomeFault},
			{"nodone", trace.ErrStreamTruncated, "", -1, OutcomeFault},
			{"stall=1ms@2", "", "", -1, OutcomeOK},
			{"json", "", "", 0, OutcomeFault},
			{"gzip", "", "", -1, OutcomeFault},
		} {
			id := fmt.Sprintf("%s-%s", name, c.fault)
			resp := post(t, srv, apiPaths[name], genBody(name, 4, true), map[string]string{"X-Request-Id": id, FaultHeader: c.fault, ReasoningHeader: "1"})
			_, rec := readAs(t, name, resp, c.fault != "json")
			e := entryByID(t, srv, id)
			events := c.events
			if events < 0 {
				if events = 4; name == api.Chat {
					events++
				}
			}
			if rec.ErrorKind != c.kind || !strings.Contains(rec.ErrorMessage, c.msgHas) || e.Outcome != c.outcome || len(e.EventMonoNs) != events {
				t.Errorf("%s: verdict %q %q, log %s with %d events, want %q %q, %s with %d", id, rec.ErrorKind, rec.ErrorMessage,
					e.Outcome, len(e.EventMonoNs), c.kind, c.msgHas, c.outcome, events)
			}
			if c.kind != trace.ErrMalformed && len(rec.EventNs) != len(e.EventMonoNs) && c.fault != "json" {
				t.Errorf("%s: the client read %d events, the log lists %d", id, len(rec.EventNs), len(e.EventMonoNs))
			}
		}
	}
	for _, name := range []api.Name{api.Embeddings, api.Rerank, api.Score} {
		body := map[api.Name]string{api.Embeddings: `{"input":"a b"}`, api.Rerank: `{"query":"a","documents":["b"]}`, api.Score: `{"text_1":"a","text_2":"b"}`}[name]
		for fault, status := range map[string]int{"status=503": 503, "error": 500, "stall=1ms": 200} {
			id := fmt.Sprintf("%s-%s", name, fault)
			resp := post(t, srv, apiPaths[name], body, map[string]string{"X-Request-Id": id, FaultHeader: fault})
			s, _ := readAs(t, name, resp, false)
			kind, _ := s.Verdict()
			if resp.StatusCode != status || (status == 200) != (kind == "") {
				t.Errorf("%s: HTTP %d, verdict %q", id, resp.StatusCode, kind)
			}
		}
		id := fmt.Sprintf("%s-disconnect", name)
		req, _ := http.NewRequest("POST", srv.URL()+apiPaths[name], strings.NewReader(body))
		req.Header.Set(FaultHeader, "disconnect=0")
		req.Header.Set("X-Request-Id", id)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s: a response, HTTP %d", id, resp.StatusCode)
		}
		waitFor(t, "the disconnect's log entry", func() bool {
			for _, e := range srv.Log() {
				if e.RequestID == id {
					return e.Outcome == OutcomeFault
				}
			}
			return false
		})
	}
}

// The log's new columns go through Parquet, and a log written before them
// (schema version 2) still reads, its new columns 0.
func TestLogAPIColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.parquet")
	srv := startMock(t, func(c *Config) { c.LogPath = path })
	readAs(t, api.Messages, post(t, srv, "/v1/messages", genBody(api.Messages, 4, true), map[string]string{"X-Request-Id": "m", ReasoningHeader: "2"}), true)
	r := post(t, srv, "/v1/rerank", `{"query":"a","documents":["b","c"]}`, map[string]string{"X-Request-Id": "r"})
	io.ReadAll(r.Body)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	rows, _, err := ReadLog(path)
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for _, e := range rows {
		switch e.RequestID {
		case "m":
			if e.Endpoint != "messages" || e.ReasoningTokens != 2 || e.FirstAnswerEvent != 2 || len(e.EventTokens) != 4 {
				t.Errorf("messages row %+v", e)
			}
		case "r":
			if e.Endpoint != "rerank" || e.Items != 2 || e.Stream {
				t.Errorf("rerank row %+v", e)
			}
		}
	}

	type v2Row struct {
		RequestID   string  `parquet:"request_id"`
		Endpoint    string  `parquet:"endpoint"`
		EventMonoNs []int64 `parquet:"event_mono_ns,list"`
	}
	old := filepath.Join(t.TempDir(), "v2.parquet")
	w, err := trace.CreateParquet[v2Row](old, trace.FileFormat{Name: FormatLog, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(v2Row{RequestID: "old", Endpoint: "chat", EventMonoNs: []int64{5, 6}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rows, _, err = ReadLog(old)
	if err != nil || len(rows) != 1 || rows[0].RequestID != "old" || rows[0].Endpoint != "chat" || len(rows[0].EventMonoNs) != 2 ||
		rows[0].ReasoningTokens != 0 || rows[0].Items != 0 || rows[0].FirstAnswerEvent != 0 {
		t.Fatalf("v2 log: %+v, %v", rows, err)
	}
}
