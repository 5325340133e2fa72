package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

// startMock runs `tracekit mock` on a free port, waits for its
// --ready-file and returns its URL and a stop function that sends SIGINT
// and waits for the log to be complete. It also checks the ready file
// against the human line on stdout and the child's pid.
func startMock(t *testing.T, bin string, args ...string) (string, func()) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "mock.ready.json")
	cmd := exec.Command(bin, append([]string{"mock", "--listen", "127.0.0.1:0", "--ready-file", ready}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	exited := make(chan struct{})
	go func() { // ends at the child's stdout EOF
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`^tracekit mock: serving \S+ on (http://\S+)$`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				lines <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
			if code := cmd.ProcessState.ExitCode(); code != ExitInterrupted {
				t.Errorf("mock exited %d after SIGINT, want %d", code, ExitInterrupted)
			}
			if _, err := os.Stat(ready); !os.IsNotExist(err) {
				t.Errorf("the mock left its ready file behind: %v", err)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Error("mock did not stop within 20 s of SIGINT")
		}
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(time.Minute) // hang guard
	for {
		r, err := mock.ReadReadyFile(ready)
		if err == nil {
			if r.PID != cmd.Process.Pid || "http://"+r.Addr != r.URL {
				t.Fatalf("ready file %+v from pid %d", r, cmd.Process.Pid)
			}
			select {
			case u := <-lines:
				if u != r.URL {
					t.Fatalf("stdout says %s, the ready file %s", u, r.URL)
				}
			case <-time.After(time.Minute):
				t.Fatal("mock printed no serving line")
			}
			return r.URL, stop
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		select {
		case <-exited:
			t.Fatal("mock exited before writing its ready file")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("mock wrote no ready file within a minute")
		}
	}
}

// The README's quick start from the command line: synth writes a multi-turn
// trace, replay sends it to `tracekit mock`, analyze reads the recording,
// and every event of the recording is found in the mock's ground truth, in
// the same order with the same tokens, stamped after the mock wrote it.
func TestPipelineAgainstMockGroundTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a replay")
	}
	dir := t.TempDir()
	bin := tracekitBinary(t)
	tr, rec, truth, js := filepath.Join(dir, "trace.parquet"), filepath.Join(dir, "rec.parquet"),
		filepath.Join(dir, "truth.parquet"), filepath.Join(dir, "result.json")

	if _, stderr, code := runCLI(t, "synth", "--conversations", "12", "--turns", "2-4", "--input-tokens", "50-100",
		"--output-tokens", "10-30", "--rate", "20", "--think-time", "20ms", "--seed", "5", "-o", tr); code != 0 {
		t.Fatalf("synth exit %d: %s", code, stderr)
	}
	url, stopMock := startMock(t, bin, "--decode-base", "2ms", "--prefill-base", "5ms", "--emit-log", truth)
	out, stderr, code := runCLI(t, "replay", tr, "--target", url, "--ready-timeout", "10s", "--progress", "none", "-o", rec)
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "Serving Benchmark Result") || !strings.Contains(out, "rec.parquet") {
		t.Errorf("replay printed no analysis or path:\n%s", out)
	}
	stopMock()

	records := readRecords(t, rec)
	entries, _, err := mock.ReadLog(truth)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]mock.LogEntry{}
	for _, e := range entries {
		byID[e.RequestID] = e
	}
	turns := len(readTurns(t, tr))
	if len(records) != turns {
		t.Fatalf("%d records for %d trace turns", len(records), turns)
	}
	var start int64
	{
		rr, err := trace.OpenRecording(rec)
		if err != nil {
			t.Fatal(err)
		}
		start = rr.Meta.StartMonoNs
		rr.Close()
	}
	for _, r := range records {
		e, ok := byID[r.RequestID]
		if !ok {
			t.Fatalf("%s: not in the mock's log", r.RequestID)
		}
		if r.ErrorKind != "" || len(r.EventNs) != len(e.EventMonoNs) {
			t.Fatalf("%s: error %q, %d events recorded, mock wrote %d", r.RequestID, r.ErrorKind, len(r.EventNs), len(e.EventMonoNs))
		}
		for i := range r.EventNs {
			if r.EventTokens[i] != e.EventTokens[i] {
				t.Fatalf("%s event %d: %d tokens recorded, mock sent %d", r.RequestID, i, r.EventTokens[i], e.EventTokens[i])
			}
			// Both clocks are CLOCK_MONOTONIC. The mock writes event i
			// after it logged the one before (the headers for event 0),
			// so its bytes cannot have arrived earlier; the log of event
			// i itself follows its write and a busy machine can delay it
			// by any amount. 1 ms covers the kernel stamp's conversion; a
			// clock or join mistake is off by seconds or whole events.
			prev := e.HeadersMonoNs
			if i > 0 {
				prev = e.EventMonoNs[i-1]
			}
			if got := start + r.EventNs[i]; got < prev-int64(time.Millisecond) {
				t.Fatalf("%s event %d: client stamp %d before the mock logged the write before it at %d (its own at %d)", r.RequestID, i, got, prev, e.EventMonoNs[i])
			}
		}
	}

	if _, stderr, code := runCLI(t, "analyze", rec, "-q", "--json", js); code != 0 {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	var res map[string]any
	raw, _ := os.ReadFile(js)
	if err := json.Unmarshal(raw, &res); err != nil || res["completed"] != float64(turns) || res["failed"] != 0.0 {
		t.Errorf("analyze json: err %v completed %v failed %v, want %d and 0", err, res["completed"], res["failed"], turns)
	}
	// The analysis replay printed at the end of the run is the one analyze
	// gives of the file, to the last digit: both read the recording (whose
	// event times are kept to the microsecond), not the records in memory.
	aout, stderr, code := runCLI(t, "analyze", rec)
	if code != 0 {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	if !strings.Contains(aout, "Serving Benchmark Result") || !strings.HasPrefix(out, aout) {
		t.Errorf("replay's analysis differs from analyze's of its recording:\n%s\n---\n%s", out, aout)
	}
	if out, stderr, code := runCLI(t, "inspect", rec); code != 0 || !strings.Contains(out, "requests") {
		t.Errorf("inspect exit %d: %s%s", code, out, stderr)
	}
}

func readRecords(t *testing.T, path string) []trace.Record {
	t.Helper()
	recs, _, err := trace.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func readTurns(t *testing.T, path string) []trace.Turn {
	t.Helper()
	rows, _, err := trace.ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
