package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// writeOTLP writes an OTLP JSON export: an agent span whose planner chat
// calls two tools, two parallel chats each continuing with one result, and
// a final chat holding both.
func writeOTLP(t *testing.T, path string) {
	t.Helper()
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixNano()
	at := func(ms int) string { return fmt.Sprint(base + int64(ms)*1e6) }
	str := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	msgs := func(ms ...any) string { b, _ := json.Marshal(ms); return string(b) }
	user := map[string]any{"role": "user", "content": "Weather in Paris and Rome?"}
	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "weather", "arguments": `{"city":"Paris"}`}},
		map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "weather", "arguments": `{"city":"Rome"}`}}}}
	r1 := map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "Paris: rain"}
	r2 := map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "Rome: sun"}
	s1 := map[string]any{"role": "assistant", "content": "Paris is rainy."}
	s2 := map[string]any{"role": "assistant", "content": "Rome is sunny."}
	chat := func(id string, from, to int, in, out string) map[string]any {
		return map[string]any{"traceId": "t1", "spanId": id, "parentSpanId": "agent", "name": "chat", "startTimeUnixNano": at(from), "endTimeUnixNano": at(to),
			"attributes": []any{str("gen_ai.operation.name", "chat"), str("gen_ai.input.messages", in), str("gen_ai.output.messages", out),
				str("gen_ai.tool.definitions", `[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]`)}}
	}
	spans := []any{
		map[string]any{"traceId": "t1", "spanId": "agent", "name": "invoke_agent", "startTimeUnixNano": at(0), "endTimeUnixNano": at(2000),
			"attributes": []any{str("gen_ai.operation.name", "invoke_agent")}},
		chat("plan", 10, 100, msgs(user), msgs(call)),
		chat("c1", 150, 300, msgs(user, call, r1), msgs(s1)),
		chat("c2", 160, 320, msgs(user, call, r2), msgs(s2)),
		chat("fin", 350, 500, msgs(user, call, r1, s1, r2, s2, map[string]any{"role": "user", "content": "Picnic where?"}),
			msgs(map[string]any{"role": "assistant", "content": "Rome."})),
	}
	b, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{"scopeSpans": []any{map[string]any{"spans": spans}}}}})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Agent traces from every source replay against `tracekit mock` as the
// graphs they are: every node recorded ok with its trace parents, and
// analyze counts them all completed.
func TestAgentTracesReplayAgainstMock(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	if testing.Short() {
		t.Skip("-short: runs replays")
	}
	dir := t.TempDir()
	otlp := filepath.Join(dir, "otlp.json")
	writeOTLP(t, otlp)
	type job struct {
		name string
		args []string
		want [][]int32 // parents of the first conversation, when checked
	}
	jobs := []job{
		{"otlp", []string{"--source", "otel", "--input", otlp}, [][]int32{nil, {0}, {0}, {1, 2}}},
		{"agent", []string{"--agent", "--conversations", "4", "--rounds", "1-3", "--fan-out", "1-3", "--sub-agents", "0-3",
			"--tool-latency", "5ms-30ms", "--input-tokens", "10-20", "--output-tokens", "3-8", "--tool-result-tokens", "10-30", "--seed", "2"}, nil},
	}
	for _, f := range []struct {
		name string
		want [][]int32
	}{{"fan_in_dependencies.json", [][]int32{nil, {-1}, {-1}, {0, 1, 2}}}, {"parallel_requests.json", [][]int32{nil, {0}, {0}, {1, 2}, {3}}}} {
		p := filepath.Join("..", "..", "..", "shared", "data", "otel_genai", f.name)
		if _, err := os.Stat(p); err != nil {
			t.Logf("shared data absent, %s not replayed: %v", f.name, err)
			continue
		}
		jobs = append(jobs, job{f.name, []string{"--source", "otel", "--input", p}, f.want})
	}
	bin := tracekitBinary(t)
	url, _ := startMock(t, bin, "--decode-base", "1ms", "--prefill-base", "2ms")
	for _, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			tr, rec, js := filepath.Join(dir, j.name+".trace.parquet"), filepath.Join(dir, j.name+".rec.parquet"), filepath.Join(dir, j.name+".json")
			if _, stderr, code := runCLI(t, append(append([]string{"synth"}, j.args...), "-o", tr)...); code != 0 {
				t.Fatalf("synth exit %d: %s", code, stderr)
			}
			turns := readTurns(t, tr)
			if j.want != nil {
				for k, w := range j.want {
					if !slices.Equal(turns[k].Parents, w) {
						t.Fatalf("trace turn %d: parents %v, want %v", k, turns[k].Parents, w)
					}
				}
			}
			// the shared files' delays are seconds: replay them 10x faster
			if _, stderr, code := runCLI(t, "replay", tr, "--target", url, "--speed", "10", "--ready-timeout", "10s", "--progress", "none", "-o", rec); code != 0 {
				t.Fatalf("replay exit %d: %s", code, stderr)
			}
			recs := readRecords(t, rec)
			if len(recs) != len(turns) {
				t.Fatalf("%d records for %d nodes", len(recs), len(turns))
			}
			byNode := map[string]int{}
			parents := map[string][]int32{}
			for _, tu := range turns {
				parents[fmt.Sprintf("%s/%d", tu.ConversationID, tu.Turn)] = tu.Parents
			}
			for _, r := range recs {
				if p := parents[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)]; !slices.Equal(r.Parents, p) {
					t.Errorf("%s/%d: recorded parents %v, the trace's %v", r.ConversationID, r.Turn, r.Parents, p)
				}
				if r.ErrorKind != "" || r.Status != 200 || len(r.EventNs) == 0 {
					t.Errorf("%s/%d: %s %s (status %d, %d events)", r.ConversationID, r.Turn, r.ErrorKind, r.ErrorMessage, r.Status, len(r.EventNs))
				}
				byNode[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)]++
			}
			for _, tu := range turns {
				if n := byNode[fmt.Sprintf("%s/%d", tu.ConversationID, tu.Turn)]; n != 1 {
					t.Errorf("node %s/%d recorded %d times", tu.ConversationID, tu.Turn, n)
				}
			}
			if _, stderr, code := runCLI(t, "analyze", rec, "-q", "--json", js); code != 0 {
				t.Fatalf("analyze exit %d: %s", code, stderr)
			}
			var res map[string]any
			raw, _ := os.ReadFile(js)
			if err := json.Unmarshal(raw, &res); err != nil || res["completed"] != float64(len(turns)) || res["failed"] != 0.0 {
				t.Errorf("analyze: err %v completed %v failed %v, want %d and 0", err, res["completed"], res["failed"], len(turns))
			}
		})
	}
}
