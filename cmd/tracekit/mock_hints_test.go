package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// A synthetic agent trace replayed against the mock: without
// --mock-hints the mock answers as tool_choice says and nearly every
// tool-calling round mismatches its recorded calls; with it the mock
// answers the recorded count and names and none does.
func TestMockHintsAgentTrace(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(200 * time.Microsecond) }) // agent traces: many tokens
	dir := t.TempDir()
	tr := filepath.Join(dir, "agents.parquet")
	if _, stderr, code := runCLI(t, "synth", "--agent", "--conversations", "20", "--rounds", "2-3", "--fan-out", "1-3", "--sub-agents", "0-2",
		"--seed", "3", "-o", tr); code != ExitOK {
		t.Fatalf("synth exit %d: %s", code, stderr)
	}
	rounds := 0
	for _, tu := range readTurns(t, tr) {
		if len(tu.ReferenceToolCalls) > 0 {
			rounds++
		}
	}
	mismatches := func(hints bool) int {
		out := filepath.Join(dir, map[bool]string{true: "hints", false: "plain"}[hints]+".parquet")
		args := []string{"replay", tr, "--target", srv.URL(), "--model", "tracekit-mock", "--speed", "50", "--progress", "none", "--no-analyze", "-o", out}
		if hints {
			args = append(args, "--mock-hints")
		}
		if stdout, stderr, code := runCLI(t, args...); code != ExitOK {
			t.Fatalf("replay exit %d:\n%s\n%s", code, stdout, stderr)
		}
		n := 0
		for _, r := range readRecords(t, out) {
			if r.ErrorKind != "" {
				t.Fatalf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
			if r.ToolCallMismatch {
				n++
			}
		}
		return n
	}
	plain, hinted := mismatches(false), mismatches(true)
	t.Logf("%d tool-calling rounds: %d mismatches without --mock-hints, %d with", rounds, plain, hinted)
	if rounds == 0 || plain < rounds/2 || hinted != 0 {
		t.Errorf("%d rounds: %d mismatches without hints (want most), %d with (want 0)", rounds, plain, hinted)
	}
}

// synth --reasoning-tokens writes each turn's reasoning count on top of
// its output tokens; replayed with --mock-hints, the mock reasons exactly
// that long on every reasoning API (the usage it reports is the trace's
// count, the answer's first text event follows that many reasoning
// tokens), and without the hint it reasons as its own settings say.
func TestMockHintsReasoningTokens(t *testing.T) {
	srv := mocktest.Start(t, nil) // no reasoning of its own
	for _, ep := range []string{"chat", "responses", "messages"} {
		t.Run(ep, func(t *testing.T) {
			dir := t.TempDir()
			tr := filepath.Join(dir, "t.parquet")
			if _, stderr, code := runCLI(t, "synth", "--endpoint", ep, "--conversations", "6", "--turns", "2", "--input-tokens", "20",
				"--output-tokens", "4", "--reasoning-tokens", "3-9", "--rate", "0", "--seed", "5", "-o", tr); code != ExitOK {
				t.Fatalf("synth exit %d: %s", code, stderr)
			}
			want := map[string]int32{} // request key -> reasoning tokens
			for _, tu := range readTurns(t, tr) {
				if tu.ReasoningTokens < 3 || tu.ReasoningTokens > 9 || tu.OutputTokens != 4+tu.ReasoningTokens {
					t.Fatalf("%s turn %d: %d reasoning of %d output tokens, want 3-9 on top of 4", tu.ConversationID, tu.Turn, tu.ReasoningTokens, tu.OutputTokens)
				}
				want[fmt.Sprintf("%s/%d", tu.ConversationID, tu.Turn)] = tu.ReasoningTokens
			}
			for _, hints := range []bool{false, true} {
				out := filepath.Join(dir, fmt.Sprintf("r-%v.parquet", hints))
				args := []string{"replay", tr, "--target", srv.URL(), "--ignore-eos", "--progress", "none", "--no-analyze", "-o", out}
				if hints {
					args = append(args, "--mock-hints")
				}
				if stdout, stderr, code := runCLI(t, args...); code != ExitOK {
					t.Fatalf("replay exit %d:\n%s\n%s", code, stdout, stderr)
				}
				recs := readRecords(t, out)
				if len(recs) != len(want) {
					t.Fatalf("%d records, want %d", len(recs), len(want))
				}
				for _, r := range recs {
					w := want[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)]
					if r.ErrorKind != "" {
						t.Fatalf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
					}
					if !hints {
						if r.ReasoningTokens > 0 {
							t.Errorf("without hints %s/%d reasoned %d tokens, want none (the mock's own setting)", r.ConversationID, r.Turn, r.ReasoningTokens)
						}
						continue
					}
					reasoned := int32(0)
					for i := 0; i < int(r.FirstAnswerEvent) && i < len(r.EventTokens); i++ {
						reasoned += r.EventTokens[i]
					}
					if r.ReasoningTokens != w || reasoned != w || r.CompletionTokens != w+4 {
						t.Errorf("%s/%d: usage %d reasoning, %d tokens before the first answer event, %d completion; want %d, %d, %d",
							r.ConversationID, r.Turn, r.ReasoningTokens, reasoned, r.CompletionTokens, w, w, w+4)
					}
				}
			}
		})
	}
}
