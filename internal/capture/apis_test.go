package capture_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

const apisKey = "sk-capture-apis-secret-4242"

// apiTrace is a trace with a conversation on each generating API beyond
// chat (a system prompt, two turns, tools on Messages) and a request on
// each non-generating one.
func apiTrace(t *testing.T) string {
	msg := func(role, text string) trace.Message { return trace.Message{Role: role, Content: text, Tokens: 3} }
	conv := func(id, ep string, start int64, turns ...[]trace.Message) []trace.Turn {
		out := make([]trace.Turn, len(turns))
		for i, m := range turns {
			out[i] = trace.Turn{ConversationID: id, Turn: int32(i), StartOffsetNs: start, ArrivalOffsetNs: start,
				ThinkTimeNs: int64(5 * time.Millisecond), Messages: m, OutputTokens: 4, Endpoint: ep}
			for _, mm := range m {
				out[i].InputTokens += mm.Tokens
			}
		}
		out[0].ThinkTimeNs = 0
		return out
	}
	tools := `[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
	msgs := conv("m", trace.EndpointMessages, 2e6, []trace.Message{msg("system", "be brief"), msg("user", "hello messages")}, []trace.Message{msg("user", "and again")})
	msgs[0].Tools, msgs[0].ToolChoice = tools, `"auto"`
	convs := [][]trace.Turn{
		conv("r", trace.EndpointResponses, 0, []trace.Message{msg("system", "answer shortly"), msg("user", "hello responses")}, []trace.Message{msg("user", "more please")}),
		msgs,
		conv("e", trace.EndpointEmbeddings, 4e6, []trace.Message{msg(trace.RoleInput, "one"), msg(trace.RoleInput, "two"), msg(trace.RoleInput, "three")}),
		conv("k", trace.EndpointRerank, 6e6, []trace.Message{msg(trace.RoleQuery, "which"), msg(trace.RoleDocument, "a"), msg(trace.RoleDocument, "b")}),
		conv("s", trace.EndpointScore, 8e6, []trace.Message{msg(trace.RoleQuery, "which"), msg(trace.RoleDocument, "c")}),
	}
	path := filepath.Join(t.TempDir(), "apis.parquet")
	w, err := trace.NewTraceWriter(path, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		if err := w.Write(c...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// replayTo replays path against base (with an API key, which Messages
// sends as x-api-key and the others as a bearer token) into a recording,
// and returns its records.
func replayTo(t *testing.T, path, base string) []trace.Record {
	t.Helper()
	out := filepath.Join(t.TempDir(), "replayed.parquet")
	r, err := replay.New(replay.Config{Trace: path, Targets: []string{base}, Model: "tracekit-mock", ContinuousUsage: "off", APIKey: apisKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := record.NewRecorder(out, trace.RunMeta{}, record.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := r.Run(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return readRecs(t, out)
}

// noKey fails when the API key is in any file under dir.
func noKey(t *testing.T, dir string) {
	t.Helper()
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
		}
		n++
		if bytes.Contains(b, []byte(apisKey)) {
			t.Errorf("%s holds the API key", p)
		}
		return nil
	})
	if n == 0 {
		t.Errorf("no files in %s", dir)
	}
}

// Every API through capture: replay of a trace with Responses and
// Messages conversations, embeddings, rerank and score requests goes
// through capture to the mock; the captured trace and recording hold each
// request with its endpoint, the conversations grouped, the inputs,
// queries and documents in their roles; the captured trace replays
// against another mock with no error; the key is in no file.
func TestCaptureEveryAPI(t *testing.T) {
	up := quickMock(t)
	dir := t.TempDir()
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: dir, Tokenizer: tokenizer.Default()}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range replayTo(t, apiTrace(t), ps.URL()) {
		if g.ErrorKind != "" {
			t.Fatalf("request through capture failed: %+v", g)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	seg := ps.Proxy().Segments()[0]
	rows := readTurns(t, seg.Trace)
	byEp := map[string][]trace.Turn{}
	for _, r := range rows {
		byEp[r.Endpoint] = append(byEp[r.Endpoint], r)
	}
	for ep, n := range map[string]int{trace.EndpointResponses: 2, trace.EndpointMessages: 2, trace.EndpointEmbeddings: 1, trace.EndpointRerank: 1, trace.EndpointScore: 1} {
		if len(byEp[ep]) != n {
			t.Fatalf("captured %d %s turns, want %d: %+v", len(byEp[ep]), ep, n, rows)
		}
	}
	for _, ep := range []string{trace.EndpointResponses, trace.EndpointMessages} {
		ts := byEp[ep]
		if ts[0].ConversationID != ts[1].ConversationID || ts[0].Turn != 0 || ts[1].Turn != 1 {
			t.Errorf("%s turns not one conversation: %+v", ep, ts)
		}
		if len(ts[0].Messages) != 2 || ts[0].Messages[0].Role != "system" || len(ts[1].Messages) != 1 || ts[1].Messages[0].Role != "user" {
			t.Errorf("%s messages %+v then %+v, want system+user then the new user message", ep, ts[0].Messages, ts[1].Messages)
		}
		if ts[0].ReferenceAnswer == "" || ts[0].OutputTokens <= 0 {
			t.Errorf("%s turn without its answer: %+v", ep, ts[0])
		}
	}
	if m := byEp[trace.EndpointMessages][0]; m.Tools != `[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]` || m.ToolChoice != `"auto"` {
		t.Errorf("messages tools %s choice %s", m.Tools, m.ToolChoice)
	}
	roles := func(ms []trace.Message) (s []string) {
		for _, m := range ms {
			s = append(s, m.Role+":"+m.Content)
		}
		return s
	}
	for ep, want := range map[string]string{
		trace.EndpointEmbeddings: `["input:one","input:two","input:three"]`,
		trace.EndpointRerank:     `["query:which","document:a","document:b"]`,
		trace.EndpointScore:      `["query:which","document:c"]`,
	} {
		got, _ := json.Marshal(roles(byEp[ep][0].Messages))
		if string(got) != want {
			t.Errorf("%s messages %s, want %s", ep, got, want)
		}
	}
	recs := readRecs(t, seg.Recording)
	if len(recs) != len(rows) {
		t.Fatalf("%d records for %d turns", len(recs), len(rows))
	}
	for _, r := range recs {
		if r.ErrorKind != "" || r.Endpoint == "" || len(r.EventNs) == 0 {
			t.Errorf("captured record %s: endpoint %q, error %s %s, %d events", r.RequestID, r.Endpoint, r.ErrorKind, r.ErrorMessage, len(r.EventNs))
		}
	}

	again := replayTo(t, seg.Trace, quickMock(t).URL())
	seen := map[string]int{}
	for _, g := range again {
		if g.ErrorKind != "" {
			t.Errorf("replay of the captured trace: %s %s: %s", g.Endpoint, g.ErrorKind, g.ErrorMessage)
		}
		seen[g.Endpoint]++
	}
	if len(again) != len(rows) || seen[trace.EndpointResponses] != 2 || seen[trace.EndpointMessages] != 2 || seen[trace.EndpointEmbeddings] != 1 ||
		seen[trace.EndpointRerank] != 1 || seen[trace.EndpointScore] != 1 {
		t.Errorf("replay of the captured trace sent %v", seen)
	}
	noKey(t, dir)
}

// A Responses request naming previous_response_id continues the
// conversation whose answer had that id; its repeated instructions are
// not a new message.
func TestCaptureResponsesChain(t *testing.T) {
	up := quickMock(t)
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: tokenizer.Default()}, "")
	if err != nil {
		t.Fatal(err)
	}
	send := func(body map[string]any) string {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, ps.URL()+"/v1/responses", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apisKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			ID string `json:"id"`
		}
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &out); err != nil || out.ID == "" || resp.StatusCode != 200 {
			t.Fatalf("HTTP %d %s: no response id", resp.StatusCode, raw)
		}
		return out.ID
	}
	id := send(map[string]any{"model": "tracekit-mock", "instructions": "terse", "input": "first", "max_output_tokens": 4})
	id = send(map[string]any{"model": "tracekit-mock", "instructions": "terse", "input": "second", "previous_response_id": id, "max_output_tokens": 4})
	send(map[string]any{"model": "tracekit-mock", "instructions": "terse", "input": "third", "previous_response_id": id, "max_output_tokens": 4})
	send(map[string]any{"model": "tracekit-mock", "input": "another", "max_output_tokens": 4})
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	rows := readTurns(t, ps.Proxy().Segments()[0].Trace)
	if len(rows) != 4 {
		t.Fatalf("captured %d turns, want 4", len(rows))
	}
	conv := rows[0].ConversationID
	for i, want := range []string{"first", "second", "third"} {
		r := rows[i]
		n := len(r.Messages)
		if r.ConversationID != conv || r.Turn != int32(i) || r.Messages[n-1].Content != want || (i > 0) != (n == 1) || !r.NonStreaming {
			t.Errorf("turn %d: %s/%d %+v", i, r.ConversationID, r.Turn, r.Messages)
		}
	}
	if rows[3].ConversationID == conv {
		t.Errorf("an unchained request joined the chain: %+v", rows[3])
	}
}

// Only the native APIs pass unrecorded, warned about once per path; the
// Responses and Messages paths are recorded and not warned about; a
// speech-to-text request that is no multipart upload is forwarded and
// said once to be unreadable, with why.
func TestCaptureWarnsOnlyNativeAPIs(t *testing.T) {
	up := quickMock(t)
	var mu sync.Mutex
	var logs strings.Builder
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: tokenizer.Default(),
		Logf: func(f string, a ...any) { mu.Lock(); fmt.Fprintf(&logs, f+"\n", a...); mu.Unlock() }}, "")
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) {
		resp, err := http.Post(ps.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 2 {
		post("/api/chat", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	}
	post("/v1/responses", `{"model":"tracekit-mock","input":"x","max_output_tokens":3}`)
	post("/v1/messages", `{"model":"tracekit-mock","max_tokens":3,"messages":[{"role":"user","content":"x"}]}`)
	for range 2 {
		post("/v1/audio/transcriptions", `not a multipart body: forwarded as it is`)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	log := logs.String()
	mu.Unlock()
	if strings.Count(log, "/api/chat is LLM traffic in Ollama's native chat API") != 1 || strings.Contains(log, "POST /v1/responses") ||
		strings.Contains(log, "POST /v1/messages") || strings.Count(log, "a POST to the transcriptions API is not a request capture can record (not a multipart/form-data body") != 1 {
		t.Errorf("log:\n%s", log)
	}
	if rows := readTurns(t, ps.Proxy().Segments()[0].Trace); len(rows) != 2 || rows[0].Endpoint != trace.EndpointResponses || rows[1].Endpoint != trace.EndpointMessages {
		t.Errorf("captured %+v, want a Responses turn and a Messages turn", rows)
	}
}

// The reasoning tokens a server reports go into the captured turn, so a
// replay with --mock-hints asks the mock for as many.
func TestCaptureKeepsReasoningTokens(t *testing.T) {
	up := mocktest.Start(t, func(c *mock.Config) { c.Latency.OutputMean, c.Latency.ReasoningMean, c.Latency.ReasoningCV = 5, 4, 0 })
	dir := t.TempDir()
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: dir, Tokenizer: tokenizer.Default()}, "")
	if err != nil {
		t.Fatal(err)
	}
	replayTo(t, apiTrace(t), ps.URL())
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range readTurns(t, ps.Proxy().Segments()[0].Trace) {
		if r.Endpoint != trace.EndpointResponses && r.Endpoint != trace.EndpointMessages {
			continue
		}
		n++
		if r.ReasoningTokens != 4 || r.OutputTokens < 4 {
			t.Errorf("%s %s/%d: %d reasoning of %d output tokens, want the mock's 4", r.Endpoint, r.ConversationID, r.Turn, r.ReasoningTokens, r.OutputTokens)
		}
	}
	if n == 0 {
		t.Fatal("no Responses or Messages turn captured")
	}
}
