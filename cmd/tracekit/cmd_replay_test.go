package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// replayFixture is a small trace and an in-process mock.
func replayFixture(t *testing.T) (tracePath, target string) {
	t.Helper()
	srv := mocktest.Start(t, func(c *mock.Config) { c.StrictModel = true })
	tracePath = filepath.Join(t.TempDir(), "trace.parquet")
	var turns []trace.Turn
	for _, id := range []string{"a", "b"} {
		for k := range 2 {
			turns = append(turns, trace.Turn{ConversationID: id, Turn: int32(k), OutputTokens: 3, InputTokens: 5,
				Messages: []trace.Message{{Role: "user", Content: "hello there", Tokens: 5}}})
		}
	}
	if err := trace.WriteTrace(tracePath, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	return tracePath, srv.URL()
}

// Each replay exit code from the command line: 0 done, 1 failed run
// (unreachable target, wrong model, no request succeeded, too many
// errors), 2 bad usage (flags out of range, an existing recording without
// --force).
func TestReplayExitCodes(t *testing.T) {
	tr, target := replayFixture(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	common := []string{"--progress", "none", "--no-analyze", "--model", "tracekit-mock"}
	out := filepath.Join(dir, "ok.parquet")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"ok", []string{"--target", target, "-o", out}, ExitOK, ""},
		{"exists", []string{"--target", target, "-o", out}, ExitUsage, "pass --force"},
		{"force", []string{"--target", target, "-o", out, "--force"}, ExitOK, ""},
		{"speed0", []string{"--target", target, "-o", filepath.Join(dir, "s.parquet"), "--speed", "0"}, ExitUsage, "--speed"},
		{"negative duration", []string{"--target", target, "-o", filepath.Join(dir, "d.parquet"), "--request-timeout", "-1s"}, ExitUsage, "--request-timeout"},
		{"negative count", []string{"--target", target, "-o", filepath.Join(dir, "c.parquet"), "--max-concurrency", "-3"}, ExitUsage, "--max-concurrency"},
		{"shard", []string{"--target", target, "-o", filepath.Join(dir, "h.parquet"), "--shard", "3/2"}, ExitUsage, "--shard"},
		{"error rate range", []string{"--target", target, "-o", filepath.Join(dir, "r.parquet"), "--max-error-rate", "1.5"}, ExitUsage, "--max-error-rate"},
		{"dead target", []string{"--target", dead, "-o", filepath.Join(dir, "dead.parquet")}, ExitFailed, "connection refused"},
		{"wrong model", []string{"--target", target, "-o", filepath.Join(dir, "m.parquet"), "--model", "nope"}, ExitFailed, "HTTP 404"},
		{"none succeeded", []string{"--target", target, "-o", filepath.Join(dir, "n.parquet"), "--no-probe", "--header", mock.FaultHeader + ":status=503"}, ExitFailed, "no request succeeded"},
		{"error rate", []string{"--target", target, "-o", filepath.Join(dir, "e.parquet"), "--no-probe", "--header", mock.FaultHeader + ":status=503", "--max-error-rate", "0.5"}, ExitFailed, "--max-error-rate 0.5"},
	} {
		args := append(append([]string{"replay", tr}, common...), c.args...)
		_, stderr, code := runCLI(t, args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming %q", c.name, code, stderr, c.code, c.want)
		}
	}
	for _, f := range []string{"dead.parquet", "m.parquet", "s.parquet"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was written by a run that failed before it started", f)
		}
	}
}

// A replay refused for an existing recording leaves it as it was, and
// nothing is sent.
func TestReplayNeverReplacesARecording(t *testing.T) {
	tr, target := replayFixture(t)
	out := filepath.Join(t.TempDir(), "rec.parquet")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", target, "-o", out, "--progress", "none", "--no-analyze"); code != ExitOK {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	before, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// A dead target: without --force the refusal comes first (exit 2).
	_, stderr, code := runCLI(t, "replay", tr, "--target", "http://127.0.0.1:1", "-o", out, "--progress", "none")
	if code != ExitUsage || !strings.Contains(stderr, out) || !strings.Contains(stderr, "--force") {
		t.Errorf("exit %d, %q; want 2 naming %s and --force", code, stderr, out)
	}
	// With --force and a dead target the run fails before the clock: the
	// old recording is still there.
	_, stderr, code = runCLI(t, "replay", tr, "--target", "http://127.0.0.1:1", "-o", out, "--progress", "none", "--force")
	if code != ExitFailed {
		t.Errorf("--force against a dead target: exit %d, %q; want 1", code, stderr)
	}
	after, err := os.ReadFile(out)
	if err != nil || string(after) != string(before) {
		t.Errorf("the recording changed (%v)", err)
	}
}

// A run that finds a killed run's journal at its path says so, with the
// rescued file and its record count.
func TestReplayReportsRecoveredJournal(t *testing.T) {
	tr, target := replayFixture(t)
	dir := t.TempDir()
	killed := filepath.Join(dir, "rec.parquet")
	// Leave a journal as a killed run would: run once, keep its journal.
	if _, stderr, code := runCLI(t, "replay", tr, "--target", target, "-o", filepath.Join(dir, "first.parquet"), "--progress", "none", "--no-analyze"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs, meta, err := trace.ReadRecords(filepath.Join(dir, "first.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	writeJournal(t, killed+".journal", meta, recs)
	_, stderr, code := runCLI(t, "replay", tr, "--target", target, "-o", killed, "--progress", "none", "--no-analyze")
	if code != ExitOK || !strings.Contains(stderr, killed+".journal") || !strings.Contains(stderr, ".recovered-") || !strings.Contains(stderr, "4 records") {
		t.Errorf("exit %d, stderr %q; want the rescued file and its 4 records named", code, stderr)
	}
}

// writeJournal writes the journal a run killed after recording recs would
// have left.
func writeJournal(t *testing.T, path string, meta trace.RunMeta, recs []trace.Record) {
	t.Helper()
	payload, err := trace.AppendRunMetaPayload(nil, meta)
	if err != nil {
		t.Fatal(err)
	}
	b := trace.AppendJournalFrame([]byte(trace.JournalMagic), payload)
	for i := range recs {
		b = trace.AppendJournalFrame(b, trace.AppendRecordPayload(nil, &recs[i]))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
