package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
)

// A real `tracekit mock` process stopped by SIGINT exits 130 once its log
// is complete, like every other command; SIGTERM, a service manager's
// normal stop, exits 0.
func TestMockSignalExitCodes(t *testing.T) {
	bin := tracekitBinary(t)
	for _, c := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGINT, ExitInterrupted}, {syscall.SIGTERM, ExitOK}} {
		dir := t.TempDir()
		ready, logPath := filepath.Join(dir, "ready.json"), filepath.Join(dir, "truth.parquet")
		cmd := exec.Command(bin, "mock", "--listen", "127.0.0.1:0", "--ready-file", ready, "--emit-log", logPath)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(time.Minute) // hang guard
		for {
			r, err := mock.ReadReadyFile(ready)
			if err == nil && r.PID == cmd.Process.Pid {
				break
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				<-exited
				t.Fatalf("no ready file within a minute:\n%s", out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Signal(c.sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
			t.Fatalf("%v: no exit within a minute:\n%s", c.sig, out.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != c.want {
			t.Errorf("%v: exit %d, want %d:\n%s", c.sig, code, c.want, out.String())
		}
		if !strings.Contains(out.String(), "ground-truth log complete") {
			t.Errorf("%v: the mock did not say its log is complete:\n%s", c.sig, out.String())
		}
		if _, _, err := mock.ReadLog(logPath); err != nil {
			t.Errorf("%v: the log: %v", c.sig, err)
		}
	}
}
