package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/mock"
	"github.com/tracekit/tracekit/trace"
)

// buildTracekit builds the tracekit binary into a temp dir.
func buildTracekit(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tracekit")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/tracekit").CombinedOutput()
	if err != nil {
		t.Fatalf("building tracekit: %v\n%s", err, out)
	}
	return bin
}

// readRecording reads every record of a recording.
func readRecording(t *testing.T, path string) ([]trace.Record, trace.RunMeta) {
	t.Helper()
	rr, err := trace.OpenRecording(path)
	if err != nil {
		t.Fatalf("the recording is not valid: %v", err)
	}
	defer rr.Close()
	recs := make([]trace.Record, rr.NumRows())
	n, err := rr.Read(recs)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return recs[:n], rr.Meta
}

// TestSignalsLeaveValidRecording sends SIGINT and SIGTERM to a real
// `tracekit replay` process mid-run: the recording must be valid, hold every
// request the mock finished, mark the in-flight ones canceled, and contain
// no trace of the API key.
func TestSignalsLeaveValidRecording(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildTracekit(t)
	const secret = "sk-tracekit-test-SECRET-9f8e7d"
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			srv := fastMock(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(20 * time.Millisecond) })
			var convs [][]trace.Turn
			for i := range 6 {
				convs = append(convs, conv(fmt.Sprintf("g%d", i), 5, time.Duration(i)*10*time.Millisecond, 0, 10))
			}
			path := writeTrace(t, convs...)
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
				if !errors.As(err, &ee) || ee.ExitCode() != 130 {
					t.Errorf("after %v: %v, want exit code 130 (interrupted, recording complete)\n%s", sig, err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("tracekit did not exit 20 s after %v; output:\n%s", sig, stderr.String())
			}
			recs, meta := readRecording(t, out)
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

// TestReplayCommandCompletes runs `tracekit replay` to the end: exit 0, the
// analysis and the recording path on stdout, a valid recording with every
// request, and bad input exiting with code 2.
func TestReplayCommandCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildTracekit(t)
	srv := fastMock(t, nil)
	path := writeTrace(t, conv("e", 3, 0, 10*time.Millisecond, 4), conv("f", 2, 5*time.Millisecond, 0, 4))
	out := filepath.Join(t.TempDir(), "rec.parquet")
	cmd := exec.Command(bin, "replay", path, "--target", srv.URL(), "-o", out, "--progress", "plain",
		"--ready-timeout", "5s", "--reset-prefix-cache", "--warmup", "1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tracekit replay: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "recording: "+out) {
		t.Errorf("stdout lacks the recording path:\n%s", stdout.String())
	}
	recs, meta := readRecording(t, out)
	if len(recs) != 5 || meta.Config["warmup"] != float64(1) || meta.Trace == nil {
		t.Errorf("%d records, meta %+v", len(recs), meta)
	}
	t.Logf("output:\n%s", stdout.String())

	bad := exec.Command(bin, "replay", path, "--target", "ftp://nowhere", "-o", out)
	err := bad.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("bad --target: %v, want exit code 2", err)
	}
}

// The file-descriptor limit: a child whose hard limit is too low for
// --max-concurrency exits 2 before sending anything, naming ulimit -n;
// one whose soft limit is low but hard limit high raises it and runs
// (here into a dead target: exit 1, not 2).
func TestFileLimitChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	bin := buildTracekit(t)
	path := writeTrace(t, conv("a", 1, 0, 0, 3))
	for _, c := range []struct {
		name, ulimit string
		code         int
		want         string
	}{
		{"hard too low", "ulimit -S -n 100 && ulimit -H -n 100", 2, "ulimit -n"},
		{"soft raised", "ulimit -S -n 100", 1, "connection refused"},
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
