package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// A graph trace (a tool-calling root, a 4-way fan-out, a join, a branch
// the mock refuses) replayed from the command line against the mock, then
// analyzed: the run names the parent_failed and mismatch counts, and
// analyze prints the session section.
func TestReplayGraphCLI(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.StrictModel = true })
	user := func(s string) []trace.Message { return []trace.Message{{Role: "user", Content: s, Tokens: 3}} }
	turns := []trace.Turn{{ConversationID: "s", Turn: 0, Messages: user("plan"), OutputTokens: 4,
		Tools: `[{"type":"function","function":{"name":"search"}}]`, ToolChoice: `"required"`,
		ReferenceToolCalls: []trace.ToolCall{{ID: "call_1", Name: "search", Arguments: "{}"}, {ID: "call_2", Name: "search", Arguments: "{}"}}}}
	for k := int32(1); k <= 4; k++ {
		turns = append(turns, trace.Turn{ConversationID: "s", Turn: k, Parents: []int32{0}, ThinkTimeNs: int64(time.Millisecond), OutputTokens: 3,
			Messages: []trace.Message{{Role: "tool", Content: "result", ToolCallID: "call_1", Tokens: 1}}})
	}
	turns[4].Model = "refused"
	turns = append(turns, trace.Turn{ConversationID: "s", Turn: 5, Parents: []int32{1, 2, 3}, OutputTokens: 3, Messages: user("sum up")},
		trace.Turn{ConversationID: "s", Turn: 6, Parents: []int32{4}, OutputTokens: 3, Messages: user("never sent")})
	dir := t.TempDir()
	tr, out := filepath.Join(dir, "graph.parquet"), filepath.Join(dir, "rec.parquet")
	if err := trace.WriteTrace(tr, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--model", "tracekit-mock", "--progress", "none", "-o", out, "--no-analyze")
	if code != ExitOK || !strings.Contains(stdout, "graphs: 1 requests not sent (parent_failed), 1 tool-call mismatches") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, stdout, stderr)
	}
	recs, _, err := trace.ReadRecords(out)
	if err != nil || len(recs) != len(turns) {
		t.Fatalf("%d records: %v", len(recs), err)
	}
	stdout, stderr, code = runCLI(t, "analyze", out)
	if code != ExitOK || !strings.Contains(stdout, "Sessions (dependency graphs)") || !strings.Contains(stdout, "Not sent (parent_failed):                1") {
		t.Fatalf("analyze: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// A trace whose wait-only edge names no earlier turn is refused before
// any of its requests is sent: exit 2, the message naming the row,
// conversation and turn. (--no-probe: the probe, sent before the trace is
// read, is not the trace's traffic.)
func TestReplayBadAfterExit2(t *testing.T) {
	srv := mocktest.Start(t, nil)
	user := []trace.Message{{Role: "user", Content: "x", Tokens: 1}}
	turns := []trace.Turn{{ConversationID: "s", Turn: 0, Messages: user, OutputTokens: 2},
		{ConversationID: "s", Turn: 1, Parents: []int32{trace.RootParent}, After: []int32{1}, Messages: user, OutputTokens: 2}}
	dir := t.TempDir()
	tr := filepath.Join(dir, "bad.parquet")
	if err := trace.WriteTrace(tr, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--model", "tracekit-mock", "--progress", "none", "-o", filepath.Join(dir, "rec.parquet"), "--no-analyze", "--no-probe")
	if code != ExitUsage || !strings.Contains(stderr, `trace row 1: conversation "s" turn 1: after 1: expected an earlier turn (0..0)`) {
		t.Fatalf("exit %d, want %d naming the turn\n%s", code, ExitUsage, stderr)
	}
	if n := len(srv.Log()); n != 0 {
		t.Errorf("the mock received %d requests from a refused trace", n)
	}
}
