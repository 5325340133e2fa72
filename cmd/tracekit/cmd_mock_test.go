package main

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
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

// `make demo` relies on this: `tracekit mock --listen 127.0.0.1:0` picks a
// free port and writes its bound address to --ready-file only once it
// answers, so the first request to that address succeeds; a mock that
// cannot bind its port exits 1 naming it and never writes the file.
func TestMockReadyFileNamesItsFreePort(t *testing.T) {
	bin := tracekitBinary(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(bin, "mock", "--listen", "127.0.0.1:0", "--ready-file", ready)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
	}()
	var r mock.Ready
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) { // hang guard
		var err error
		if r, err = mock.ReadReadyFile(ready); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("%v:\n%s", err, out.String())
		}
	}
	if _, port, _ := net.SplitHostPort(r.Addr); port == "0" || port == "" || r.URL != "http://"+r.Addr || r.PID != cmd.Process.Pid {
		t.Fatalf("ready file %+v from pid %d", r, cmd.Process.Pid)
	}
	// One request, no retry: the file means serving.
	resp, err := http.Get(r.URL + "/v1/models")
	if err != nil {
		t.Fatalf("the first request to the ready file's address: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models: %s", resp.Status)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0") // the port someone else holds
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := filepath.Join(t.TempDir(), "ready.json")
	b, err := exec.Command(bin, "mock", "--listen", ln.Addr().String(), "--ready-file", taken).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitFailed || !strings.Contains(string(b), ln.Addr().String()) {
		t.Errorf("mock on a taken port: %v, want exit 1 naming %s:\n%s", err, ln.Addr(), b)
	}
	if _, err := os.Stat(taken); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("mock on a taken port wrote its ready file: %v", err)
	}
}
