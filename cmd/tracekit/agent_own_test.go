package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// synth --agent --sub-agent-context own, replayed closed-loop against the
// mock with the trace's answers as history: every branch and join was
// sent exactly its delay after the latest done of what it waits for
// (checkAfterWaits, on the recording's stamps); a branch's request holds
// only its sub-task (a fresh context) and a join's holds the round's tool
// results but none of the branches' answers.
func TestAgentOwnContextReplay(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(200 * time.Microsecond) }) // agent traces: many tokens
	dir := t.TempDir()
	tr, rec := filepath.Join(dir, "agents.parquet"), filepath.Join(dir, "rec.parquet")
	stdout, stderr, code := runCLI(t, "synth", "--agent", "--conversations", "8", "--rounds", "2", "--fan-out", "1-2",
		"--sub-agents", "2-3", "--sub-agent-context", "own", "--tool-latency", "20ms", "--output-tokens", "8-16", "--seed", "5", "-o", tr)
	if code != ExitOK {
		t.Fatalf("synth exit %d: %s", code, stderr)
	}
	turns, _ := synthAfterEdges(t, tr, stdout)
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--model", "tracekit-mock", "--history", "reference",
		"--ignore-eos", "--progress", "none", "--no-analyze", "-o", rec); code != ExitOK {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	recs := readRecords(t, rec)
	if len(recs) != len(turns) {
		t.Fatalf("%d records for %d turns", len(recs), len(turns))
	}
	if waited := checkAfterWaits(t, turns, recs, 1); waited == 0 {
		t.Fatal("no request with wait-only edges was checked")
	}

	// What each request carried, from the mock's log.
	type msg struct{ Role, Content, ToolCallID string }
	bodies := map[string][]msg{}
	for _, e := range srv.Log() {
		var b struct {
			Messages []struct {
				Role       string `json:"role"`
				Content    any    `json:"content"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(e.Body, &b); err != nil {
			t.Fatalf("%s: %v", e.RequestID, err)
		}
		for _, m := range b.Messages {
			c, _ := m.Content.(string)
			bodies[e.RequestID] = append(bodies[e.RequestID], msg{m.Role, c, m.ToolCallID})
		}
	}
	id := map[string]string{}
	for _, r := range recs {
		id[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)] = r.RequestID
	}
	byTurn := func(tu trace.Turn, k int32) trace.Turn {
		for _, x := range turns {
			if x.ConversationID == tu.ConversationID && x.Turn == k {
				return x
			}
		}
		t.Fatalf("%s has no turn %d", tu.ConversationID, k)
		return trace.Turn{}
	}
	joins := 0
	for _, tu := range turns {
		if len(tu.After) < 2 {
			continue
		}
		joins++
		join := bodies[id[fmt.Sprintf("%s/%d", tu.ConversationID, tu.Turn)]]
		tools := 0
		for _, m := range join {
			if m.Role == "tool" {
				tools++
			}
		}
		if want := len(byTurn(tu, tu.Parents[0]).ReferenceToolCalls); tools < want {
			t.Errorf("%s/%d: the join carried %d tool results, the round called %d tools", tu.ConversationID, tu.Turn, tools, want)
		}
		for _, b := range tu.After {
			br := byTurn(tu, b)
			for _, m := range join {
				if m.Content == br.ReferenceAnswer {
					t.Errorf("%s/%d: the join carried branch %d's answer", tu.ConversationID, tu.Turn, b)
				}
			}
			got := bodies[id[fmt.Sprintf("%s/%d", tu.ConversationID, b)]]
			if len(got) != 1 || got[0].Role != "user" || got[0].Content != br.Messages[0].Content {
				t.Errorf("%s/%d: a branch's request carried %+v, want its sub-task alone", tu.ConversationID, b, got)
			}
		}
	}
	if joins == 0 {
		t.Fatal("no join in the trace")
	}
}
