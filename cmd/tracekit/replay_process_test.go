package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// The tests here run `tracekit replay` as a real process (the test binary
// as main, see TestMain): real signals, real exit codes, real limits.

// processMock starts an in-process mock with millisecond latencies (decode
// as given) that keeps its log.
func processMock(t *testing.T, decode time.Duration) *mock.Server {
	t.Helper()
	return mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(decode) })
}

// processTrace writes conversations id0..id<n-1> of turns turns each, the
// i-th starting at i*spacing, asking for out tokens per turn.
func processTrace(t *testing.T, prefix string, n, turns int, spacing time.Duration, think time.Duration, out int32) string {
	t.Helper()
	var all []trace.Turn
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		for k := range turns {
			all = append(all, trace.Turn{ConversationID: id, Turn: int32(k), StartOffsetNs: int64(i) * int64(spacing),
				ThinkTimeNs: int64(think), InputTokens: 10, OutputTokens: out,
				Messages: []trace.Message{{Role: "user", Content: fmt.Sprintf("question %d of %s", k, id), Tokens: 10}}})
		}
	}
	path := filepath.Join(t.TempDir(), "trace.parquet")
	if err := trace.WriteTrace(path, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"}, all); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SIGINT and SIGTERM to a real `tracekit replay` process mid-run: exit
// 130, and the recording is valid, holds every request the mock finished,
// marks the in-flight ones canceled, and contains no trace of the API key.
func TestReplaySignalsLeaveValidRecording(t *testing.T) {
	bin := tracekitBinary(t)
	const secret = "sk-tracekit-test-SECRET-9f8e7d"
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			srv := processMock(t, 20*time.Millisecond)
			path := processTrace(t, "g", 6, 5, 10*time.Millisecond, 0, 10)
			out := filepath.Join(t.TempDir(), "rec.parquet")
			cmd := exec.Command(bin, "replay", path, "--target", srv.URL(), "-o", out, "--ignore-eos",
				"--progress", "none", "--no-analyze", "--api-key-env", "TK_TEST_KEY",
				"--header", "X-Api-Key: "+secret)
			cmd.Env = append(os.Environ(), "TK_TEST_KEY="+secret)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, func() bool { return len(srv.Log()) >= 8 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != ExitInterrupted {
					t.Errorf("after %v: %v, want exit code 130 (interrupted, recording complete)\n%s", sig, err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("tracekit did not exit 20 s after %v; output:\n%s", sig, stderr.String())
			}
			recs, meta, err := trace.ReadRecords(out)
			if err != nil {
				t.Fatalf("the recording is not valid: %v", err)
			}
			byID := map[string]trace.Record{}
			canceled := 0
			for _, r := range recs {
				byID[r.RequestID] = r
				if r.ErrorKind == trace.ErrCanceled {
					canceled++
				}
			}
			finished := 0
			for _, e := range srv.Log() {
				if e.Outcome != mock.OutcomeOK || !strings.HasPrefix(e.RequestID, "g") {
					continue // failed, or the pre-run continuous-usage probe
				}
				finished++
				r, ok := byID[e.RequestID]
				if !ok {
					t.Errorf("%s finished at the mock but is not in the recording", e.RequestID)
				} else if r.ErrorKind != "" && r.ErrorKind != trace.ErrCanceled {
					t.Errorf("%s: error %q %s", e.RequestID, r.ErrorKind, r.ErrorMessage)
				}
			}
			if finished < 6 || canceled == 0 || len(recs) >= 30 {
				t.Errorf("%d records (%d canceled), %d finished at the mock: want a run cut short with in-flight requests canceled\n%s", len(recs), canceled, finished, stderr.String())
			}
			if meta.Health == nil || meta.StartMonoNs == 0 {
				t.Errorf("run meta incomplete: %+v", meta)
			}
			for _, f := range []string{out, out + ".journal"} {
				b, err := os.ReadFile(f)
				if err == nil && bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s contains the API key", f)
				}
			}
			if bytes.Contains(stderr.Bytes(), []byte(secret)) {
				t.Error("the output contains the API key")
			}
		})
	}
}

// `tracekit replay` as a process, to the end: exit 0, the analysis and the
// recording path on stdout, a valid recording with every request; bad
// input exits with code 2.
func TestReplayProcessCompletes(t *testing.T) {
	bin := tracekitBinary(t)
	srv := processMock(t, time.Millisecond)
	path := processTrace(t, "e", 2, 3, 5*time.Millisecond, 10*time.Millisecond, 4)
	out := filepath.Join(t.TempDir(), "rec.parquet")
	cmd := exec.Command(bin, "replay", path, "--target", srv.URL(), "-o", out, "--progress", "plain",
		"--ready-timeout", "5s", "--reset-prefix-cache", "--warmup", "1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tracekit replay: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "recording: "+out) || !strings.Contains(stdout.String(), "Successful requests:") {
		t.Errorf("stdout lacks the analysis or the recording path:\n%s", stdout.String())
	}
	recs, meta, err := trace.ReadRecords(out)
	if err != nil || len(recs) != 6 || meta.Config["warmup"] != float64(1) || meta.Trace == nil {
		t.Errorf("%v: %d records, meta %+v", err, len(recs), meta)
	}

	bad := exec.Command(bin, "replay", path, "--target", "ftp://nowhere", "-o", out)
	err = bad.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitUsage {
		t.Errorf("bad --target: %v, want exit code 2", err)
	}
}

// The file-descriptor limit: a process whose hard limit is too low for
// --max-concurrency exits 2 before sending anything, naming ulimit -n;
// one whose soft limit is low but hard limit high raises it and runs
// (here into a dead target: exit 1, not 2).
func TestReplayFileLimitChecked(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	bin := tracekitBinary(t)
	path := processTrace(t, "a", 1, 1, 0, 0, 3)
	for _, c := range []struct {
		name, ulimit string
		code         int
		want         string
	}{
		{"hard too low", "ulimit -S -n 100 && ulimit -H -n 100", ExitUsage, "ulimit -n"},
		{"soft raised", "ulimit -S -n 100", ExitFailed, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rec.parquet")
			cmd := exec.Command("sh", "-c", c.ulimit+` && exec "$0" "$@"`, bin, "replay", path, "--target", "http://127.0.0.1:1",
				"--max-concurrency", "1000", "-o", out, "--progress", "none")
			b, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(b), c.want) {
				t.Errorf("%v: %s; want exit %d naming %q", err, b, c.code, c.want)
			}
		})
	}
}
