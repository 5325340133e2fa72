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

	"github.com/tracekit/tracekit/trace"
)

// exitCodeOf returns a finished command's exit code (-1: did not run).
func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// startReplayProcess starts `tracekit replay` as a real process writing
// out; its combined output goes to buf.
func startReplayProcess(t *testing.T, tracePath, target, out string, buf *bytes.Buffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(tracekitBinary(t), "replay", tracePath, "--target", target, "-o", out,
		"--ignore-eos", "--progress", "none", "--no-analyze")
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// waitExit waits (at most 60 s, a hang guard) for cmd to exit.
func waitExit(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return exitCodeOf(err)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v did not exit within 60 s:\n%s", cmd.Args, out.String())
		return -1
	}
}

// Two `tracekit replay` processes with the same -o: the second refuses
// with exit 2 naming the first one's pid and touches nothing; the first
// finishes its complete recording, and no journal, partial, lock or
// rescued file is left beside it.
func TestReplaySameOutputLocked(t *testing.T) {
	srv := processMock(t, 20*time.Millisecond)
	path := processTrace(t, "l", 4, 4, 10*time.Millisecond, 0, 10)
	dir := t.TempDir()
	out := filepath.Join(dir, "rec.parquet")
	var first bytes.Buffer
	a := startReplayProcess(t, path, srv.URL(), out, &first)
	// The first run is writing once its journal exists.
	waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(out + ".journal"); return err == nil })

	var second bytes.Buffer
	b := startReplayProcess(t, path, srv.URL(), out, &second)
	if code := waitExit(t, b, &second); code != ExitUsage {
		t.Errorf("second replay on the same -o: exit %d, want 2\n%s", code, second.String())
	}
	if msg := second.String(); !strings.Contains(msg, fmt.Sprintf("pid %d", a.Process.Pid)) || !strings.Contains(msg, out) {
		t.Errorf("the refusal names neither the output nor the first run's pid %d: %q", a.Process.Pid, msg)
	}
	if code := waitExit(t, a, &first); code != ExitOK {
		t.Fatalf("first replay: exit %d\n%s", code, first.String())
	}
	recs, _, err := trace.ReadRecords(out)
	if err != nil || len(recs) != 16 {
		t.Fatalf("first run's recording: %d records, %v; want all 16\n%s", len(recs), err, first.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files beside the recording: %v, want only rec.parquet", names)
	}
}

// A replay killed by SIGKILL holds no lock any more: `tracekit recover`
// turns its journal into a recording, and a new replay on the same -o
// runs (and may again be killed and rescued by the next one).
func TestReplayKilledLeavesNoStaleLock(t *testing.T) {
	srv := processMock(t, 20*time.Millisecond)
	path := processTrace(t, "k", 4, 4, 10*time.Millisecond, 0, 10)
	dir := t.TempDir()
	out := filepath.Join(dir, "rec.parquet")
	kill := func() {
		var buf bytes.Buffer
		a := startReplayProcess(t, path, srv.URL(), out, &buf)
		waitFor(t, 30*time.Second, func() bool { _, err := os.Stat(out + ".journal"); return err == nil })
		a.Process.Signal(syscall.SIGKILL)
		waitExit(t, a, &buf)
	}

	kill()
	if _, stderr, code := runCLI(t, "recover", out); code != ExitOK {
		t.Fatalf("recover after SIGKILL: exit %d: %s", code, stderr)
	}
	if _, _, err := trace.ReadRecords(out); err != nil {
		t.Fatalf("recovered recording: %v", err)
	}
	for _, f := range []string{out + ".journal", out + ".lock"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left after recover", f)
		}
	}

	os.Remove(out)
	kill()
	var buf bytes.Buffer
	b := startReplayProcess(t, path, srv.URL(), out, &buf)
	if code := waitExit(t, b, &buf); code != ExitOK || !strings.Contains(buf.String(), "rescued") {
		t.Fatalf("replay after a killed one on the same -o: exit %d, want 0 rescuing its journal\n%s", code, buf.String())
	}
	if recs, _, err := trace.ReadRecords(out); err != nil || len(recs) != 16 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
}
