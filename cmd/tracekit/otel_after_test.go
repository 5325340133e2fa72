package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// The shared OTel files imported and replayed closed-loop against the mock:
// the wait-only edges the import found (agents that rewrote their context
// around an earlier answer) are in the trace and in the recording, and each
// waiting node was sent exactly its scaled delay after the latest done time
// of its parents and the turns it waits for: never before a waited turn
// ended. Asserted on the recording's stamps, not on wall-clock budgets.
func TestOTelAfterReplayWaits(t *testing.T) {
	src := filepath.Join("..", "..", "..", "shared", "data", "otel_genai")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(200 * time.Microsecond) }) // agent traces: many tokens
	dir := t.TempDir()
	tr, rec := filepath.Join(dir, "otel.parquet"), filepath.Join(dir, "rec.parquet")
	stdout, stderr, code := runCLI(t, "synth", "--source", "otel", "--input", src, "--max-idle", "1s", "-o", tr)
	if code != ExitOK {
		t.Fatalf("synth exit %d: %s", code, stderr)
	}
	turns, after := synthAfterEdges(t, tr, stdout)
	const speed = 200.0
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--model", "tracekit-mock", "--speed", fmt.Sprint(speed),
		"--ignore-eos", "--progress", "none", "--no-analyze", "-o", rec); code != ExitOK {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	recs := readRecords(t, rec)
	if len(recs) != len(turns) {
		t.Fatalf("%d records for %d turns", len(recs), len(turns))
	}
	waited := checkAfterWaits(t, turns, recs, speed)
	t.Logf("%d turns, %d After edges, %d waiting nodes checked", len(turns), after, waited)
}

// checkAfterWaits asserts, from a closed-loop replay of turns at speed,
// that every request with wait-only edges was recorded with its trace's
// After, was not sent before any of them was done, and was intended
// exactly its delay after the latest done of its parents and After turns.
// It fails on a recorded error and returns how many such requests it
// checked.
func checkAfterWaits(t *testing.T, turns []trace.Turn, recs []trace.Record, speed float64) int {
	t.Helper()
	byNode := map[string]trace.Record{}
	for _, r := range recs {
		if r.ErrorKind != "" {
			t.Fatalf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
		byNode[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)] = r
	}
	waited := 0
	for _, tu := range turns {
		r := byNode[fmt.Sprintf("%s/%d", tu.ConversationID, tu.Turn)]
		if fmt.Sprint(r.After) != fmt.Sprint(tu.After) && len(r.After)+len(tu.After) > 0 {
			t.Errorf("%s: recorded after %v, the trace's %v", r.RequestID, r.After, tu.After)
		}
		if len(tu.After) == 0 {
			continue
		}
		think := int64(float64(tu.ThinkTimeNs) / speed)
		latest := byNode[tu.ConversationID+"/0"].IntendedNs // the conversation start
		deps := append([]int32(nil), tu.After...)
		for _, p := range tu.Parents {
			if p != trace.RootParent {
				deps = append(deps, p)
			}
		}
		if len(tu.Parents) == 0 {
			deps = append(deps, tu.Turn-1)
		}
		for _, d := range deps {
			latest = max(latest, byNode[fmt.Sprintf("%s/%d", tu.ConversationID, d)].DoneNs)
		}
		for _, a := range tu.After {
			if w := byNode[fmt.Sprintf("%s/%d", tu.ConversationID, a)]; r.IntendedNs < w.DoneNs+think || r.SentNs < w.DoneNs {
				t.Errorf("%s: intended %d sent %d, before waited turn %d's done %d + delay %d", r.RequestID, r.IntendedNs, r.SentNs, a, w.DoneNs, think)
			}
		}
		if r.IntendedNs != latest+think {
			t.Errorf("%s: intended %d, want the latest done of %v (%d) + delay %d", r.RequestID, r.IntendedNs, deps, latest, think)
		}
		waited++
	}
	return waited
}

// synthAfterEdges reads the trace synth wrote to tr and checks that it
// holds wait-only edges and that synth's report (stdout) counted them all;
// it returns the turns and the count.
func synthAfterEdges(t *testing.T, tr, stdout string) ([]trace.Turn, int) {
	t.Helper()
	turns := readTurns(t, tr)
	after := 0
	for _, tu := range turns {
		after += len(tu.After)
	}
	if after == 0 || !strings.Contains(stdout, fmt.Sprintf("edges_after                  %d", after)) {
		t.Fatalf("the trace holds %d After edges; synth said:\n%s", after, stdout)
	}
	return turns, after
}
