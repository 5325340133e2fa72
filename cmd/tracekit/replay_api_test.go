package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apis"
	"github.com/tracekit/tracekit/internal/api/embeddings"
	"github.com/tracekit/tracekit/internal/api/rerank"
	"github.com/tracekit/tracekit/trace"
)

// apiKey is the key the replays below send; it must never reach a
// recording or the command's output.
const apiKey = "sk-test-9f8e7d6c5b4a"

// apiReq is one request an apiServer received.
type apiReq struct {
	path   string
	header http.Header
	body   map[string]any
	raw    string
}

// apiServer is a loopback server of every API, answering with the api
// packages' own encoders: a generating API streams reasoning, then two
// pieces of text (or, when the request offers tools, a tool call); the
// others answer one body with an item per input or document. It checks
// what each API's requests must carry (Messages: anthropic-version and
// x-api-key, never Authorization; the others: the Bearer key) and fails
// the test otherwise.
type apiServer struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	got []apiReq
}

func startAPIServer(t *testing.T) *apiServer {
	s := &apiServer{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *apiServer) requests() []apiReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]apiReq(nil), s.got...)
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	raw := new(bytes.Buffer)
	raw.ReadFrom(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw.Bytes(), &body); err != nil {
		s.t.Errorf("%s: a body that is not a JSON object: %v: %s", r.URL.Path, err, raw)
		http.Error(w, "bad json", 400)
		return
	}
	s.mu.Lock()
	n := len(s.got)
	s.got = append(s.got, apiReq{path: r.URL.Path, header: r.Header.Clone(), body: body, raw: raw.String()})
	s.mu.Unlock()
	spec, ok := apis.ByPath(r.URL.Path)
	if !ok {
		s.t.Errorf("a request to %s", r.URL.Path)
		http.Error(w, "no such API", 404)
		return
	}
	if spec.Name == api.Messages {
		if v := r.Header.Get("anthropic-version"); v != "2023-06-01" {
			s.t.Errorf("a Messages request with anthropic-version %q", v)
			http.Error(w, "anthropic-version", 400)
			return
		}
		if a := r.Header.Get("Authorization"); a != "" {
			s.t.Errorf("a Messages request with an Authorization header")
			http.Error(w, "authorization", 400)
			return
		}
		if k := r.Header.Get("x-api-key"); k != apiKey {
			s.t.Errorf("a Messages request with x-api-key %q", k)
		}
		if _, ok := body["max_tokens"]; !ok {
			s.t.Errorf("a Messages request without max_tokens: %s", raw)
		}
	} else if a := r.Header.Get("Authorization"); a != "Bearer "+apiKey {
		s.t.Errorf("a %s request with Authorization %q", spec.Name, a)
	}
	h := &api.Head{ID: fmt.Sprintf("r%d", n), Model: "m", Created: 1790000000, Prompt: 10, Completion: 3, Finish: api.FinishStop, IncludeUsage: true}
	items := func(key string) []any { l, _ := body[key].([]any); return l }
	switch spec.Name {
	case api.Embeddings:
		w.Header().Set("Content-Type", "application/json")
		w.Write(embeddings.AppendBody(nil, h, len(items("input")), 4, 10))
		return
	case api.Rerank, api.Score:
		docs := items("documents")
		if spec.Name == api.Score {
			docs = items("text_2")
		}
		scores := make([]float64, len(docs))
		for i := range scores {
			scores[i] = 1 / float64(i+2)
		}
		w.Header().Set("Content-Type", "application/json")
		if spec.Name == api.Score {
			w.Write(rerank.AppendScoreBody(nil, h, scores, 10))
		} else {
			w.Write(rerank.AppendBody(nil, h, scores, 10))
		}
		return
	}
	if stream, _ := body["stream"].(bool); !stream {
		s.t.Errorf("a %s request without stream: %s", spec.Name, raw)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	enc := spec.NewEncoder()
	fl := w.(http.Flusher)
	send := func(b []byte) { w.Write(b); fl.Flush() }
	u := api.Usage{Prompt: 10, Completion: 3, Cached: 0, Reasoning: 1}
	send(enc.Begin(nil, h))
	send(enc.Reasoning(nil, []byte("Let me think."), 1))
	if tools := items("tools"); len(tools) > 0 {
		h.Finish = api.FinishToolCalls
		name := toolName(tools[0])
		send(enc.ToolCall(nil, fmt.Sprintf("call_%d", n), name, []byte(`{"q":`), 1))
		send(enc.ToolArgs(nil, []byte(`"x"}`), 1))
	} else {
		send(enc.Text(nil, []byte("Hello"), 1))
		send(enc.Text(nil, []byte(" world"), 1))
	}
	send(enc.End(nil, u))
	send(enc.Done(nil))
}

// toolName is the function name of a tool of any API's shape.
func toolName(t any) string {
	m, _ := t.(map[string]any)
	if n, ok := m["name"].(string); ok {
		return n
	}
	f, _ := m["function"].(map[string]any)
	n, _ := f["name"].(string)
	return n
}

// writeAPITrace writes turns (one conversation each, or several turns of
// one) to a trace file.
func writeAPITrace(t *testing.T, turns []trace.Turn) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.parquet")
	w, err := trace.NewTraceWriter(p, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(turns...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// chatTurns is a conversation of two turns on endpoint ep: a system
// prompt and a question, then a follow-up.
func chatTurns(id, ep string) []trace.Turn {
	return []trace.Turn{
		{ConversationID: id, Turn: 0, Endpoint: ep, OutputTokens: 3, Messages: []trace.Message{
			{Role: "system", Content: "Be brief.", Tokens: 3}, {Role: "user", Content: "Say hello.", Tokens: 3}}},
		{ConversationID: id, Turn: 1, Endpoint: ep, OutputTokens: 3, ThinkTimeNs: int64(time.Millisecond),
			ArrivalOffsetNs: int64(time.Millisecond), Messages: []trace.Message{{Role: "user", Content: "Again, please.", Tokens: 3}}},
	}
}

// replayAPI replays tr against s with args added and returns the
// recording's records (read back from the file), its bytes and stderr.
func replayAPI(t *testing.T, s *apiServer, tr string, args ...string) ([]trace.Record, []byte, string) {
	t.Helper()
	t.Setenv("TK_TEST_KEY", apiKey)
	out := filepath.Join(t.TempDir(), "rec.parquet")
	stdout, stderr, code := runCLI(t, append([]string{"replay", tr, "--target", s.srv.URL, "--model", "m",
		"--api-key-env", "TK_TEST_KEY", "--progress", "none", "--no-analyze", "-o", out}, args...)...)
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the recording": string(b), "stdout": stdout, "stderr": stderr} {
		if strings.Contains(text, apiKey) {
			t.Errorf("the API key is in %s", what)
		}
	}
	return readRecords(t, out), b, stderr
}

// byTurn keys records by conversation/turn.
func byTurn(recs []trace.Record) map[string]trace.Record {
	m := map[string]trace.Record{}
	for _, r := range recs {
		m[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)] = r
	}
	return m
}

// checkGenerated checks a streamed record of the apiServer's answer:
// reasoning then two text events, stamped in order after the headers.
func checkGenerated(t *testing.T, r trace.Record, ep string, wantReasoning int32) {
	t.Helper()
	if r.ErrorKind != "" || r.Status != 200 {
		t.Fatalf("%s/%d: %s %s (HTTP %d)", r.ConversationID, r.Turn, r.ErrorKind, r.ErrorMessage, r.Status)
	}
	if r.Endpoint != ep || r.NonStreaming {
		t.Errorf("endpoint %q non-streaming %v; want %s streamed", r.Endpoint, r.NonStreaming, ep)
	}
	if len(r.EventNs) != 3 || r.FirstAnswerEvent != 1 {
		t.Errorf("%d events, first answer event %d; want 3 and 1 (reasoning first)", len(r.EventNs), r.FirstAnswerEvent)
	}
	// The events are kept to the microsecond from sent_ns: compared with
	// headers_ns and done_ns as the recording would keep those.
	at := func(ns int64) int64 { return trace.StoredEventTime(r.SentNs, ns) }
	for i, ns := range r.EventNs {
		if ns < at(r.HeadersNs) || ns > at(r.DoneNs) || (i > 0 && ns < r.EventNs[i-1]) {
			t.Errorf("event %d stamped %d: headers %d, done %d, events %v", i, ns, r.HeadersNs, r.DoneNs, r.EventNs)
		}
	}
	if r.PromptTokens != 10 || r.CompletionTokens != 3 || r.ReasoningTokens != wantReasoning {
		t.Errorf("usage prompt %d completion %d reasoning %d; want 10, 3, %d", r.PromptTokens, r.CompletionTokens, r.ReasoningTokens, wantReasoning)
	}
}

// Responses, stateless: each turn sends the whole history as input
// items, the live answer included; the system prompt is instructions.
// Stateful (--responses-state server): the second turn sends only its new
// message, chained to the first answer's id.
func TestReplayResponses(t *testing.T) {
	for _, state := range []string{"client", "server"} {
		t.Run(state, func(t *testing.T) {
			s := startAPIServer(t)
			recs, _, _ := replayAPI(t, s, writeAPITrace(t, chatTurns("c", "responses")), "--responses-state", state, "--reasoning-effort", "high")
			if len(recs) != 2 {
				t.Fatalf("%d records", len(recs))
			}
			for _, r := range recs {
				checkGenerated(t, r, "responses", 1)
			}
			reqs := s.requests()
			for _, q := range reqs {
				if q.path != "/v1/responses" || q.body["instructions"] != nil && q.body["instructions"] != "Be brief." {
					t.Errorf("request to %s: %s", q.path, q.raw)
				}
				if e, _ := q.body["reasoning"].(map[string]any); e["effort"] != "high" || q.body["max_output_tokens"] != 3.0 {
					t.Errorf("reasoning or max_output_tokens missing: %s", q.raw)
				}
			}
			second := reqs[1]
			input, _ := second.body["input"].([]any)
			if state == "client" {
				if second.body["previous_response_id"] != nil || len(input) != 3 || second.body["instructions"] != "Be brief." ||
					!strings.Contains(second.raw, `{"type":"message","role":"assistant","content":"Hello world"}`) {
					t.Errorf("stateless second request: %s", second.raw)
				}
			} else {
				if second.body["previous_response_id"] != "resp_r0" || len(input) != 1 || second.body["instructions"] != "Be brief." ||
					!strings.Contains(second.raw, "Again, please.") {
					t.Errorf("stateful second request: %s", second.raw)
				}
			}
		})
	}
}

// Messages: system on top, content blocks, max_tokens, thinking, the key
// as x-api-key and anthropic-version (the server fails the test
// otherwise), the live answer carried into the next turn.
func TestReplayMessages(t *testing.T) {
	s := startAPIServer(t)
	recs, _, _ := replayAPI(t, s, writeAPITrace(t, chatTurns("c", "messages")), "--thinking-budget", "1024")
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		checkGenerated(t, r, "messages", 1)
	}
	reqs := s.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, q := range reqs {
		th, _ := q.body["thinking"].(map[string]any)
		if q.path != "/v1/messages" || q.body["system"] != "Be brief." || th["type"] != "enabled" || th["budget_tokens"] != 1024.0 {
			t.Errorf("request: %s", q.raw)
		}
	}
	msgs, _ := reqs[1].body["messages"].([]any)
	if len(msgs) != 3 || !strings.Contains(reqs[1].raw, `{"role":"assistant","content":[{"type":"text","text":"Hello world"}]}`) {
		t.Errorf("the second request does not carry the first answer: %s", reqs[1].raw)
	}
}

// The non-generating APIs: one body each, its items counted.
func TestReplayEmbeddingsRerankScore(t *testing.T) {
	s := startAPIServer(t)
	turns := []trace.Turn{
		{ConversationID: "e", Endpoint: "embeddings", Messages: []trace.Message{
			{Role: trace.RoleInput, Content: "one", Tokens: 1}, {Role: trace.RoleInput, Content: "two", Tokens: 1}, {Role: trace.RoleInput, Content: "three", Tokens: 1}}},
		{ConversationID: "r", Endpoint: "rerank", StartOffsetNs: 1, ArrivalOffsetNs: 1, Messages: []trace.Message{
			{Role: trace.RoleQuery, Content: "which?", Tokens: 1}, {Role: trace.RoleDocument, Content: "this", Tokens: 1}, {Role: trace.RoleDocument, Content: "that", Tokens: 1}}},
		{ConversationID: "s", Endpoint: "score", StartOffsetNs: 2, ArrivalOffsetNs: 2, Messages: []trace.Message{
			{Role: trace.RoleQuery, Content: "which?", Tokens: 1}, {Role: trace.RoleDocument, Content: "this", Tokens: 1}}},
	}
	recs, _, _ := replayAPI(t, s, writeAPITrace(t, turns))
	got := byTurn(recs)
	for conv, want := range map[string]struct {
		ep    string
		items int32
	}{"e": {"embeddings", 3}, "r": {"rerank", 2}, "s": {"score", 1}} {
		r, ok := got[conv+"/0"]
		if !ok {
			t.Fatalf("no record of %s", conv)
		}
		if r.ErrorKind != "" || r.Endpoint != want.ep || r.Items != want.items || !r.NonStreaming || len(r.EventNs) != 1 ||
			r.EventNs[0] < trace.StoredEventTime(r.SentNs, r.HeadersNs) || r.PromptTokens != 10 {
			t.Errorf("%s: %+v", want.ep, r)
		}
	}
	bodies := map[string]string{}
	for _, q := range s.requests() {
		bodies[q.path] = q.raw
	}
	for path, want := range map[string]string{
		"/v1/embeddings": `{"model":"m","input":["one","two","three"],"encoding_format":"float"}`,
		"/v1/rerank":     `{"model":"m","query":"which?","documents":["this","that"]}`,
		"/v1/score":      `{"model":"m","text_1":"which?","text_2":["this"]}`,
	} {
		if bodies[path] != want {
			t.Errorf("%s body %s; want %s", path, bodies[path], want)
		}
	}
}

// --endpoint overrides the trace's endpoints; without it each turn goes
// where its trace says, "" to chat.
func TestReplayEndpointOverride(t *testing.T) {
	s := startAPIServer(t)
	turns := append(chatTurns("a", ""), chatTurns("b", "responses")...)
	for i := range turns[2:] {
		turns[2+i].StartOffsetNs, turns[2+i].ArrivalOffsetNs = 1, 1
	}
	tr := writeAPITrace(t, turns)
	recs, _, _ := replayAPI(t, s, tr, "--endpoint", "messages")
	for _, r := range recs {
		checkGenerated(t, r, "messages", 1)
	}
	for _, q := range s.requests() {
		if q.path != "/v1/messages" {
			t.Errorf("with --endpoint messages, a request to %s", q.path)
		}
	}
	s2 := startAPIServer(t)
	recs, _, _ = replayAPI(t, s2, tr)
	for _, r := range recs {
		want := map[string]string{"a": "chat", "b": "responses"}[r.ConversationID]
		if r.Endpoint != want || r.ErrorKind != "" {
			t.Errorf("%s/%d: endpoint %q error %q; want %s", r.ConversationID, r.Turn, r.Endpoint, r.ErrorKind, want)
		}
	}
}

// A turn its endpoint cannot carry is refused before anything is sent:
// exit 2 naming the conversation, the turn and why.
func TestReplayEndpointRefused(t *testing.T) {
	s := startAPIServer(t)
	turns := chatTurns("agent", "")
	turns[0].Messages = turns[0].Messages[1:] // a user's text embeds; the tools of turn 1 do not
	turns[1].Tools = `[{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]`
	tr := writeAPITrace(t, turns)
	t.Setenv("TK_TEST_KEY", apiKey)
	out := filepath.Join(t.TempDir(), "rec.parquet")
	_, stderr, code := runCLI(t, "replay", tr, "--target", s.srv.URL, "--model", "m", "--api-key-env", "TK_TEST_KEY",
		"--progress", "none", "--no-analyze", "-o", out, "--endpoint", "embeddings")
	if code != 2 || !strings.Contains(stderr, `conversation "agent" turn 1`) || !strings.Contains(stderr, "tools") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a recording was written")
	}
}

// Agent graphs replay on Responses and Messages with their tool-call
// shapes: the live tool calls come back as function_call and
// function_call_output items, tool_use and tool_result blocks.
func TestReplayAgentGraphResponsesMessages(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1790000000")
	tr := filepath.Join(t.TempDir(), "agent.parquet")
	if _, stderr, code := runCLI(t, "synth", "--agent", "--conversations", "2", "--rounds", "2-2", "--fan-out", "2-2",
		"--sub-agents", "1", "--tool-latency", "1ms", "--seed", "3", "-o", tr); code != 0 {
		t.Fatalf("synth exit %d: %s", code, stderr)
	}
	for ep, shapes := range map[string][]string{
		"responses": {`"type":"function_call","call_id":"call_`, `"type":"function_call_output","call_id":`},
		"messages":  {`"type":"tool_use","id":"call_`, `"type":"tool_result","tool_use_id":`},
	} {
		t.Run(ep, func(t *testing.T) {
			s := startAPIServer(t)
			recs, _, _ := replayAPI(t, s, tr, "--endpoint", ep, "--speed", "100")
			if len(recs) == 0 {
				t.Fatal("no records")
			}
			calls := 0
			for _, r := range recs {
				if r.ErrorKind != "" || r.Endpoint != ep {
					t.Errorf("%s/%d: endpoint %q error %s %s", r.ConversationID, r.Turn, r.Endpoint, r.ErrorKind, r.ErrorMessage)
				}
				calls += int(r.ToolCalls)
			}
			if calls == 0 {
				t.Error("no live tool calls recorded")
			}
			var all strings.Builder
			for _, q := range s.requests() {
				all.WriteString(q.raw)
			}
			for _, shape := range shapes {
				if !strings.Contains(all.String(), shape) {
					t.Errorf("no request carries %s", shape)
				}
			}
		})
	}
}

// Open loop (--timing trace) carries the trace's reference answers in the
// next request's API shape.
func TestReplayAPIOpenLoopHistory(t *testing.T) {
	for ep, want := range map[string]string{
		"responses": `{"type":"message","role":"assistant","content":"The reference."}`,
		"messages":  `{"role":"assistant","content":[{"type":"text","text":"The reference."}]}`,
	} {
		t.Run(ep, func(t *testing.T) {
			s := startAPIServer(t)
			turns := chatTurns("o", ep)
			turns[0].ReferenceAnswer = "The reference."
			recs, _, _ := replayAPI(t, s, writeAPITrace(t, turns), "--timing", "trace")
			if len(recs) != 2 {
				t.Fatalf("%d records", len(recs))
			}
			for _, r := range recs {
				checkGenerated(t, r, ep, 1)
			}
			var second string
			for _, q := range s.requests() {
				if strings.Contains(q.raw, "Again, please.") {
					second = q.raw
				}
			}
			if !strings.Contains(second, want) {
				t.Errorf("the second request does not carry the reference answer as %s: %s", want, second)
			}
		})
	}
}
