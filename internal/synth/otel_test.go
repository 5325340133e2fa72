package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/tracekit/tracekit/internal/history"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

const sharedOTel = "../../../shared/data/otel_genai"

func sharedOTelFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(sharedOTel, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	return p
}

func importOTel(t *testing.T, path string) ([]Conversation, *OTel) {
	t.Helper()
	s, err := NewOTel(OTelOptions{Path: path, Tokenizer: tokenizer.Default()})
	if err != nil {
		t.Fatal(err)
	}
	convs, err := s.Conversations(context.Background())
	if err != nil {
		t.Fatalf("importing %s: %v", path, err)
	}
	return convs, s
}

// parentsOf is turn k's parents with the trace's defaults spelled out:
// nil for turn 0 and a RootParent, k-1 for an empty list.
func parentsOf(c Conversation, k int) []int32 {
	p := c[k].Parents
	if len(p) == 0 {
		if k == 0 {
			return nil
		}
		return []int32{int32(k - 1)}
	}
	if len(p) == 1 && p[0] == trace.RootParent {
		return nil
	}
	return p
}

// fullInput is turn k's prompt as replay with reference history sends it.
func fullInput(c Conversation, k int) []trace.Message {
	return slices.Concat(HistoryOf(c, Transcripts(c), k), c[k].Messages)
}

func TestOTelFanIn(t *testing.T) {
	convs, s := importOTel(t, sharedOTelFile(t, "fan_in_dependencies.json"))
	if len(convs) != 1 || len(convs[0]) != 4 {
		t.Fatalf("want 1 conversation of 4 turns, got %d (%v)", len(convs), convs)
	}
	c := convs[0]
	for k := 0; k < 3; k++ {
		if p := parentsOf(c, k); p != nil {
			t.Errorf("turn %d: parents %v, want a root", k, p)
		}
		if len(c[k].Messages) != 1 || c[k].Messages[0].Role != "user" {
			t.Errorf("turn %d: messages %+v, want its one user message", k, c[k].Messages)
		}
	}
	if !slices.Equal(c[3].Parents, []int32{0, 1, 2}) {
		t.Fatalf("join: parents %v, want [0 1 2]", c[3].Parents)
	}
	// the join's history is the three answered calls, in order; its one new
	// message is the question about them
	hist := HistoryOf(c, Transcripts(c), 3)
	var roles []string
	for _, m := range hist {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,user,assistant,user,assistant" {
		t.Fatalf("join history roles %v", roles)
	}
	for k := 0; k < 3; k++ {
		if hist[2*k+1].Content != c[k].ReferenceAnswer || hist[2*k].Content != c[k].Messages[0].Content {
			t.Errorf("join history pair %d is not turn %d's transcript", k, k)
		}
	}
	if len(c[3].Messages) != 1 || !strings.HasPrefix(c[3].Messages[0].Content, "Now compare all three") {
		t.Errorf("join messages %+v", c[3].Messages)
	}
	// timing: roots at their offsets from the start, the join 1 s after the
	// last call ended (05.0 -> 06.0)
	wantThink := []time.Duration{0, 2500 * time.Millisecond, 3 * time.Second, time.Second}
	for k, w := range wantThink {
		if got := time.Duration(c[k].ThinkTimeNs); got != w {
			t.Errorf("turn %d: think %v, want %v", k, got, w)
		}
		if got := time.Duration(c[k].ArrivalOffsetNs); k == 3 && got != 6*time.Second {
			t.Errorf("join arrival %v, want 6s", got)
		}
	}
	r := s.Report()
	if r["edges_history"] != "3" || r["roots"] != "3" || r["llm_spans"] != "4" {
		t.Errorf("report %v", r)
	}
}

func TestOTelParallel(t *testing.T) {
	convs, _ := importOTel(t, sharedOTelFile(t, "parallel_requests.json"))
	if len(convs) != 1 || len(convs[0]) != 5 {
		t.Fatalf("want 1 conversation of 5 turns, got %v", convs)
	}
	c := convs[0]
	// span 1; spans 2 and 3 overlap (02.5-05.0, 03.0-05.5), both after 1;
	// span 4 holds both answers; span 5 follows 4
	want := [][]int32{nil, {0}, {0}, {1, 2}, {3}}
	for k, w := range want {
		if got := parentsOf(c, k); !slices.Equal(got, w) {
			t.Errorf("turn %d: parents %v, want %v", k, got, w)
		}
	}
	wantThink := []time.Duration{0, 500 * time.Millisecond, time.Second, 500 * time.Millisecond, 500 * time.Millisecond}
	for k, w := range wantThink {
		if got := time.Duration(c[k].ThinkTimeNs); got != w {
			t.Errorf("turn %d: think %v, want %v", k, got, w)
		}
	}
	// the two branches add one user message each to the shared context
	for _, k := range []int{1, 2, 3, 4} {
		if len(c[k].Messages) != 1 || c[k].Messages[0].Role != "user" {
			t.Errorf("turn %d: messages %+v, want one user message", k, c[k].Messages)
		}
	}
}

// otelFileSpan is a span-list span as the test reads it, independently of
// the importer.
type otelFileSpan struct {
	SpanID    string         `json:"span_id"`
	StartTime string         `json:"start_time"`
	EndTime   string         `json:"end_time"`
	Attrs     map[string]any `json:"attributes"`
}

func readSpanList(t *testing.T, path string) []otelFileSpan {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Spans []otelFileSpan }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Spans
}

func isoNs(t *testing.T, s string) int64 {
	s = strings.TrimSuffix(s, "+00:00")
	tm, err := time.Parse("2006-01-02T15:04:05.999999", s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixNano()
}

// TestOTelHistoryReproducesInput is the import's invariant on every shared
// file: each node's merged parent history plus its messages is exactly its
// span's input messages, parents and waits (After) are earlier turns that
// ended before it started, its delay is measured from the last of them, and
// every LLM span is one node.
func TestOTelHistoryReproducesInput(t *testing.T) {
	if _, err := os.Stat(sharedOTel); err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(sharedOTel, "*.json"))
	if len(files) != 9 {
		t.Fatalf("want the 9 shared files, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			spans := readSpanList(t, f)
			origin := int64(1 << 62)
			byStart := map[int64][]otelFileSpan{}
			for _, sp := range spans {
				st := isoNs(t, sp.StartTime)
				origin = min(origin, st)
				byStart[st] = append(byStart[st], sp)
			}
			convs, _ := importOTel(t, f)
			nodes := 0
			for _, c := range convs {
				for k, turn := range c {
					nodes++
					at := origin + turn.ArrivalOffsetNs
					if len(byStart[at]) != 1 {
						t.Fatalf("turn %d of %s: %d spans start at its arrival", k, turn.ConversationID, len(byStart[at]))
					}
					sp := byStart[at][0]
					var want []struct{ Role, Content string }
					if err := json.Unmarshal([]byte(sp.Attrs["gen_ai.input.messages"].(string)), &want); err != nil {
						t.Fatal(err)
					}
					got := fullInput(c, k)
					if len(got) != len(want) {
						t.Fatalf("span %s: history+messages has %d messages, its input %d", sp.SpanID, len(got), len(want))
					}
					for i := range want {
						if got[i].Role != want[i].Role || got[i].Content != want[i].Content {
							t.Fatalf("span %s message %d: got %s %.40q, input has %s %.40q", sp.SpanID, i, got[i].Role, got[i].Content, want[i].Role, want[i].Content)
						}
					}
					lastEnd := origin + c[0].StartOffsetNs
					for _, p := range slices.Concat(parentsOf(c, k), turn.After) {
						if p < 0 || int(p) >= k {
							t.Fatalf("span %s: parent %d of turn %d", sp.SpanID, p, k)
						}
						pe := origin + c[p].ArrivalOffsetNs
						psp := byStart[pe][0]
						end := isoNs(t, psp.EndTime)
						if end > at {
							t.Errorf("span %s: parent span %s ends after it starts", sp.SpanID, psp.SpanID)
						}
						lastEnd = max(lastEnd, end)
					}
					if turn.ThinkTimeNs != at-lastEnd {
						t.Errorf("span %s: think %d, want start - last parent end = %d", sp.SpanID, turn.ThinkTimeNs, at-lastEnd)
					}
					if turn.ReferenceAnswer == "" || turn.OutputTokens < 1 {
						t.Errorf("span %s: no reference answer or output tokens", sp.SpanID)
					}
				}
			}
			if nodes != len(spans) {
				t.Errorf("%d nodes from %d LLM spans", nodes, len(spans))
			}
		})
	}
}

// otlpFile is an OTLP JSON export written by hand: one agent span with a
// planner chat, two parallel tool executions, two parallel chats each
// continuing the planner's tool call with one result, and a final chat
// holding both; plus an unrelated second trace.
func otlpFile(t *testing.T) []byte {
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixNano()
	at := func(ms int) string { return fmt.Sprint(base + int64(ms)*1e6) }
	str := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	num := func(k string, v int) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"intValue": fmt.Sprint(v)}}
	}
	msgs := func(ms ...map[string]any) string { b, _ := json.Marshal(ms); return string(b) }
	sys := map[string]any{"role": "system", "content": "You are a travel agent."}
	user := map[string]any{"role": "user", "content": "Weather in Paris and Rome?"}
	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "weather", "arguments": `{"city":"Paris"}`}},
		map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "weather", "arguments": `{"city":"Rome"}`}},
	}}
	res1 := map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "Paris: 12C rain"}
	res2 := map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "Rome: 18C sun"}
	sum1 := map[string]any{"role": "assistant", "content": "Paris is rainy."}
	sum2 := map[string]any{"role": "assistant", "content": "Rome is sunny."}
	fin := map[string]any{"role": "user", "content": "Which one for a picnic?"}
	tools := `[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]`
	span := func(id, parent, name string, from, to int, attrs ...map[string]any) map[string]any {
		s := map[string]any{"traceId": "aa01", "spanId": id, "name": name, "kind": 1,
			"startTimeUnixNano": at(from), "endTimeUnixNano": at(to), "attributes": attrs}
		if parent != "" {
			s["parentSpanId"] = parent
		}
		return s
	}
	chat := func(id, in, out string, from, to, outTok int) map[string]any {
		return span(id, "agent", "chat gpt-x", from, to, str("gen_ai.operation.name", "chat"),
			str("gen_ai.request.model", "gpt-x"), str("gen_ai.input.messages", in),
			str("gen_ai.output.messages", out), num("gen_ai.usage.output_tokens", outTok),
			str("gen_ai.tool.definitions", tools))
	}
	spans := []any{
		span("agent", "", "invoke_agent travel", 0, 9000, str("gen_ai.operation.name", "invoke_agent"), str("gen_ai.conversation.id", "trip-1")),
		chat("plan", msgs(sys, user), msgs(call), 100, 1100, 30),
		span("tool1", "agent", "execute_tool weather", 1200, 2200, str("gen_ai.operation.name", "execute_tool")),
		span("tool2", "agent", "execute_tool weather", 1250, 2700, str("gen_ai.operation.name", "execute_tool")),
		chat("c1", msgs(sys, user, call, res1), msgs(sum1), 2300, 3300, 5),
		chat("c2", msgs(sys, user, call, res2), msgs(sum2), 2800, 3900, 6),
		chat("final", msgs(sys, user, call, res1, sum1, res2, sum2, fin), msgs(map[string]any{"role": "assistant", "content": "Rome."}), 4400, 5000, 2),
	}
	for _, s := range spans[1:] {
		s.(map[string]any)["attributes"] = append(s.(map[string]any)["attributes"].([]map[string]any), str("gen_ai.conversation.id", "trip-1"))
	}
	other := span("solo", "", "chat gpt-x", 500, 700, str("gen_ai.operation.name", "chat"),
		str("gen_ai.input.messages", msgs(map[string]any{"role": "user", "content": "hi"})),
		str("gen_ai.output.messages", msgs(map[string]any{"role": "assistant", "content": "hello"})))
	other["traceId"] = "bb02"
	spans = append(spans, other)
	doc := map[string]any{"resourceSpans": []any{map[string]any{
		"resource":   map[string]any{"attributes": []any{str("service.name", "travel")}},
		"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "test"}, "spans": spans}},
	}}}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOTelOTLPExport(t *testing.T) {
	plain := otlpFile(t)
	var gz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(plain)
	gw.Close()
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(plain)
	zw.Close()
	dir := t.TempDir()
	for name, b := range map[string][]byte{"export.json": plain, "export.json.gz": gz.Bytes(), "export.zst": zs.Bytes(),
		"dup.jsonl": slices.Concat(plain, []byte("\n"), plain, []byte("\n"))} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			if name == "dup.jsonl" {
				_, err := mustFail(t, p)
				if !strings.Contains(err.Error(), "span agent") || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "twice") {
					t.Fatalf("a span repeated: %v", err)
				}
				return
			}
			convs, s := importOTel(t, p)
			if len(convs) != 2 {
				t.Fatalf("want trip-1 and the solo trace, got %d", len(convs))
			}
			var c Conversation
			for _, cv := range convs {
				if cv[0].ConversationID == "trip-1" {
					c = cv
				} else if cv[0].ConversationID != "bb02" || len(cv) != 1 {
					t.Errorf("other conversation %s of %d turns", cv[0].ConversationID, len(cv))
				}
			}
			if len(c) != 4 {
				t.Fatalf("trip-1: %d turns, want plan, two parallel chats and the final one", len(c))
			}
			want := [][]int32{nil, {0}, {0}, {1, 2}}
			for k, w := range want {
				if got := parentsOf(c, k); !slices.Equal(got, w) {
					t.Errorf("turn %d: parents %v, want %v", k, got, w)
				}
			}
			if got := c[0].ReferenceToolCalls; len(got) != 2 || got[0].ID != "call_1" || got[1].Arguments != `{"city":"Rome"}` || c[0].ReferenceAnswer != "" {
				t.Errorf("planner's reference tool calls %+v answer %q", got, c[0].ReferenceAnswer)
			}
			if m := c[1].Messages; len(m) != 1 || m[0].Role != "tool" || m[0].ToolCallID != "call_1" {
				t.Errorf("branch 1 messages %+v, want the tool result of call_1", m)
			}
			if m := c[3].Messages; len(m) != 1 || m[0].Content != "Which one for a picnic?" {
				t.Errorf("final messages %+v", m)
			}
			// delays: the tool time (1100 -> 2300, 1100 -> 2800), the join
			// after the slower branch (3900 -> 4400)
			for k, w := range []time.Duration{0, 1200 * time.Millisecond, 1700 * time.Millisecond, 500 * time.Millisecond} {
				if got := time.Duration(c[k].ThinkTimeNs); got != w {
					t.Errorf("turn %d: think %v, want %v", k, got, w)
				}
			}
			if c[0].OutputTokens != 30 || c[0].Tools == "" {
				t.Errorf("planner output tokens %d (usage 30), tools %q", c[0].OutputTokens, c[0].Tools)
			}
			r := s.Report()
			if r["spans"] != "8" || r["llm_spans"] != "5" || r["edges_history"] != "4" || r["output_tokens_from_usage"] != "4" || r["answers_with_tool_calls"] != "1" {
				t.Errorf("report %v", r)
			}
			for k := range c {
				if got, want := len(fullInput(c, k)), []int{2, 4, 4, 8}[k]; got != want {
					t.Errorf("turn %d: prompt of %d messages, the span's input has %d", k, got, want)
				}
			}
		})
	}
}

// TestOTelJSONLines reads an export of one OTLP object per line.
func TestOTelJSONLines(t *testing.T) {
	one := otlpFile(t)
	two := strings.NewReplacer(`"aa01"`, `"aa09"`, `"bb02"`, `"bb09"`, `"trip-1"`, `"trip-2"`).Replace(string(one))
	p := filepath.Join(t.TempDir(), "spans.jsonl")
	os.WriteFile(p, []byte(string(one)+"\n"+two+"\n"), 0o644)
	convs, _ := importOTel(t, p)
	n := map[string]int{}
	for _, c := range convs {
		n[c[0].ConversationID] = len(c)
	}
	if n["trip-1"] != 4 || n["trip-2"] != 4 || n["bb02"] != 1 || n["bb09"] != 1 {
		t.Errorf("conversations %v", n)
	}
}

func mustFail(t *testing.T, path string) (*OTel, error) {
	t.Helper()
	s, err := NewOTel(OTelOptions{Path: path, Tokenizer: tokenizer.Default()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Conversations(context.Background())
	if err == nil {
		t.Fatalf("%s imported", path)
	}
	return s, err
}

func TestOTelBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, body, want string }{
		{"messages.json", `{"spans":[{"span_id":"s1","start_time":"2026-01-01T00:00:00","end_time":"2026-01-01T00:00:01","attributes":{"gen_ai.operation.name":"chat","gen_ai.input.messages":"[{\"role\": \"user\", \"content\": 5}]"}}]}`, "span s1: attribute gen_ai.input.messages"},
		{"time.json", `{"spans":[{"span_id":"s2","start_time":"yesterday","end_time":"2026-01-01T00:00:01","attributes":{}}]}`, "span s2: start_time"},
		{"order.json", `{"spans":[{"span_id":"s3","start_time":"2026-01-01T00:00:02","end_time":"2026-01-01T00:00:01","attributes":{}}]}`, "span s3: end_time is before"},
		{"otlp.json", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"t","spanId":"x9","startTimeUnixNano":"12a","endTimeUnixNano":"5"}]}]}]}`, "span x9: startTimeUnixNano"},
		{"syntax.json", "{\"spans\": [\n{\"span_id\": }]}", "line 2"},
		{"other.json", `{"rows": []}`, "no spans"},
		{"nollm.json", `{"spans":[{"span_id":"t","start_time":"2026-01-01T00:00:00","end_time":"2026-01-01T00:00:01","attributes":{"gen_ai.operation.name":"execute_tool"}}]}`, "no LLM span"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, c.name)
		os.WriteFile(p, []byte(c.body), 0o644)
		_, err := mustFail(t, p)
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want it to name the file and %q", c.name, err, c.want)
		}
	}
	if _, err := mustFail(t, filepath.Join(dir, "nollm.json")); !errors.Is(err, ErrNoConversations) {
		t.Errorf("no LLM span: %v, want ErrNoConversations", err)
	}
}

// TestOTelDirectory reads every file of a directory; a session id found
// in two files (the shared chain and its copy) stays two conversations.
func TestOTelDirectory(t *testing.T) {
	if _, err := os.Stat(sharedOTel); err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	convs, s := importOTel(t, sharedOTel)
	ids := map[string]int{}
	turns := 0
	for _, c := range convs {
		ids[c[0].ConversationID] += len(c)
		turns += len(c)
	}
	if ids["simple_chain.json/session"] != 3 || ids["simple_chain_alt.json/session"] != 3 {
		t.Errorf("the two copies of one session: %v", ids)
	}
	r := s.Report()
	if r["files"] != "9" || r["llm_spans"] != fmt.Sprint(turns) || r["spans"] != fmt.Sprint(turns) {
		t.Errorf("report %v for %d turns", r, turns)
	}
	// starts are sorted and the first conversation starts at 0
	if convs[0][0].StartOffsetNs != 0 {
		t.Errorf("first conversation starts at %d", convs[0][0].StartOffsetNs)
	}
}

// A sub-agent span under a tool span under a planner, with a fresh prompt
// of its own: the parentage is found but cannot be a trace parent (its
// history would be the planner's transcript), so the span is a root that
// waits for the planner (After), its delay measured from the planner's end.
func TestOTelParentageWithoutHistory(t *testing.T) {
	body := `{"spans":[
 {"span_id":"plan","start_time":"2026-01-01T00:00:00","end_time":"2026-01-01T00:00:01","attributes":{"gen_ai.operation.name":"chat","gen_ai.input.messages":"[{\"role\":\"user\",\"content\":\"plan\"}]","gen_ai.output.text":"delegate"}},
 {"span_id":"tool","parent_span_id":"plan","start_time":"2026-01-01T00:00:01.1","end_time":"2026-01-01T00:00:03","attributes":{"gen_ai.operation.name":"execute_tool"}},
 {"span_id":"sub","parent_span_id":"tool","start_time":"2026-01-01T00:00:01.5","end_time":"2026-01-01T00:00:02","attributes":{"gen_ai.operation.name":"chat","gen_ai.input.messages":"[{\"role\":\"system\",\"content\":\"you research\"},{\"role\":\"user\",\"content\":\"x\"}]","gen_ai.output.text":"found"}}]}`
	p := filepath.Join(t.TempDir(), "sub.json")
	os.WriteFile(p, []byte(body), 0o644)
	convs, s := importOTel(t, p)
	if len(convs) != 1 || len(convs[0]) != 2 {
		t.Fatalf("%v", convs)
	}
	c := convs[0]
	if !slices.Equal(c[1].Parents, []int32{trace.RootParent}) || !slices.Equal(c[1].After, []int32{0}) || c[1].ThinkTimeNs != int64(500*time.Millisecond) || len(c[1].Messages) != 2 {
		t.Errorf("sub-agent: parents %v after %v think %d messages %d", c[1].Parents, c[1].After, c[1].ThinkTimeNs, len(c[1].Messages))
	}
	if r := s.Report(); r["edges_after"] != "1" || r["edges_parentage"] != "0" || r["spans"] != "3" || r["llm_spans"] != "2" {
		t.Errorf("report %v", r)
	}
}

// MaxIdle cuts stretches with no span open down to MaxIdle: a file
// collected two days after the others starts MaxIdle after the last span
// before it ended, while two overlapping sessions keep their relative
// timing and each session its own.
func TestOTelMaxIdle(t *testing.T) {
	span := func(id, session, start, end string) string {
		return `{"span_id":"` + id + `","start_time":"` + start + `","end_time":"` + end + `","attributes":{"session.id":"` + session +
			`","gen_ai.operation.name":"chat","gen_ai.input.messages":"[{\"role\":\"user\",\"content\":\"q ` + id + `\"}]","gen_ai.output.text":"a ` + id + `"}}`
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"spans":[`+
		span("a1", "A", "2026-01-01T00:00:00", "2026-01-01T00:00:02")+","+
		span("b1", "B", "2026-01-01T00:00:01", "2026-01-01T00:00:05")+"]}"), 0o644)
	os.WriteFile(filepath.Join(dir, "c.json"), []byte(`{"spans":[`+
		span("c1", "C", "2026-01-03T00:00:00", "2026-01-03T00:00:01")+","+
		span("c2", "C", "2026-01-03T00:00:03", "2026-01-03T00:00:04")+"]}"), 0o644)
	starts := func(maxIdle time.Duration) (map[string][]int64, map[string]string) {
		s, err := NewOTel(OTelOptions{Path: dir, Tokenizer: tokenizer.Default(), MaxIdle: maxIdle})
		if err != nil {
			t.Fatal(err)
		}
		convs, err := s.Conversations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]int64{}
		for _, c := range convs {
			for _, turn := range c {
				got[turn.ConversationID] = append(got[turn.ConversationID], turn.ArrivalOffsetNs)
			}
		}
		return got, s.Report()
	}
	sec := int64(time.Second)
	kept, r := starts(0)
	if kept["C"][0] != 48*3600*sec || r["idle_time_cut"] != "0s" {
		t.Fatalf("MaxIdle 0 moved the times: %v, report %v", kept, r)
	}
	cut, r := starts(10 * time.Second)
	// B ends at 5 s: C starts 10 s later, its second turn 3 s after its first.
	want := map[string][]int64{"A": {0}, "B": {1 * sec}, "C": {15 * sec, 18 * sec}}
	for id, w := range want {
		if !slices.Equal(cut[id], w) {
			t.Errorf("%s: arrivals %v, want %v", id, cut[id], w)
		}
	}
	if r["idle_time_cut"] != (48*time.Hour - 15*time.Second).String() {
		t.Errorf("report idle_time_cut %q", r["idle_time_cut"])
	}
	if _, err := NewOTel(OTelOptions{Path: dir, Tokenizer: tokenizer.Default(), MaxIdle: -time.Second}); err == nil {
		t.Error("a negative MaxIdle was accepted")
	}
}

// Every dependency the shared files hold is waited for: when an earlier
// span ended before a span started and its answer is an assistant message
// of that span's input, the later turn reaches the earlier one through
// Parents and After. The links only After keeps are the agents that
// rewrote their context around an earlier answer (before wait-only edges
// they were roots at recorded offsets and closed loop did not wait).
func TestOTelSharedDependenciesWaited(t *testing.T) {
	if _, err := os.Stat(sharedOTel); err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(sharedOTel, "*.json"))
	links, onlyAfter, afterEdges := 0, 0, 0
	for _, f := range files {
		spans := readSpanList(t, f)
		origin := int64(1 << 62)
		ends := map[int64]int64{} // start -> end (starts are unique, TestOTelHistoryReproducesInput checks)
		for _, sp := range spans {
			st := isoNs(t, sp.StartTime)
			origin = min(origin, st)
			ends[st] = isoNs(t, sp.EndTime)
		}
		convs, _ := importOTel(t, f)
		for _, c := range convs {
			// reach[k][j]: turn k is sent after turn j; hist[k][j]: through Parents only
			reach, hist := make([]map[int]bool, len(c)), make([]map[int]bool, len(c))
			for k := range c {
				reach[k], hist[k] = map[int]bool{}, map[int]bool{}
				for _, p := range parentsOf(c, k) {
					hist[k][int(p)], reach[k][int(p)] = true, true
					for a := range hist[p] {
						hist[k][a] = true
					}
					for a := range reach[p] {
						reach[k][a] = true
					}
				}
				for _, a := range c[k].After {
					afterEdges++
					reach[k][int(a)] = true
					for x := range reach[a] {
						reach[k][x] = true
					}
				}
				start := origin + c[k].ArrivalOffsetNs
				in := fullInput(c, k)
				for j := range k {
					if ends[origin+c[j].ArrivalOffsetNs] > start {
						continue
					}
					ans := trace.Message{Role: "assistant", Content: c[j].ReferenceAnswer, ToolCalls: c[j].ReferenceToolCalls}
					if !slices.ContainsFunc(in, func(m trace.Message) bool { return history.Same(&m, &ans) }) {
						continue
					}
					links++
					if !reach[k][j] {
						t.Errorf("%s: turn %d holds turn %d's answer, ended before it, but does not wait for it (parents %v, after %v)",
							filepath.Base(f), k, j, c[k].Parents, c[k].After)
					}
					if !hist[k][j] {
						onlyAfter++
					}
				}
			}
		}
	}
	t.Logf("%d answer links, %d kept by wait-only edges alone, %d After edges", links, onlyAfter, afterEdges)
	if onlyAfter == 0 || afterEdges == 0 {
		t.Errorf("no link needed a wait-only edge: %d links, %d After edges", links, afterEdges)
	}
	_, s := importOTel(t, sharedOTel)
	if r := s.Report(); r["edges_after"] != strconv.Itoa(afterEdges) {
		t.Errorf("report edges_after %s, the trace holds %d", r["edges_after"], afterEdges)
	}
}
