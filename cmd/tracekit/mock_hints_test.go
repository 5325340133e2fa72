package main

import (
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
