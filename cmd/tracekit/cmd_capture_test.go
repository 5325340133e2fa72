package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// TestCaptureExitCodes: bad flags exit 2, an upstream nobody listens on
// exits 1 at start naming it.
func TestCaptureExitCodes(t *testing.T) {
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"capture", "--upstream", "ftp://x", "--out", out}, ExitUsage, "--upstream"},
		{[]string{"capture", "--out", out}, ExitUsage, "--upstream"},
		{[]string{"capture", "--upstream", "http://127.0.0.1:1", "--out", out, "--listen", "0.0.0.0:0"}, ExitUsage, "--listen"},
		{[]string{"capture", "--upstream", "http://127.0.0.1:1", "--out", out, "--rotate-every", "soon"}, ExitUsage, "--rotate-every"},
		{[]string{"capture", "--upstream", "http://127.0.0.1:1", "--out", out, "--proxy-stack", "nginx"}, ExitUsage, "--proxy-stack"},
	} {
		if _, stderr, code := runCLI(t, c.args...); code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %s", c.args, code, stderr, c.code, c.want)
		}
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, stderr, code := runCLI(t, "capture", "--listen", "127.0.0.1:0", "--upstream", dead, "--out", out)
	if code != ExitFailed || !strings.Contains(stderr, ln.Addr().String()) || !strings.Contains(stderr, "not reachable") {
		t.Fatalf("dead upstream: exit %d, stderr %q", code, stderr)
	}
}

// TestCaptureSignals runs the real binary: after SIGINT it exits 130 and
// after SIGTERM 0, each time with its trace and recording complete (read
// back) and no journal or partial file left; the second run forwards with
// --proxy-stack net/http.
func TestCaptureSignals(t *testing.T) {
	up := mocktest.Start(t, func(c *mock.Config) { c.Latency.OutputMean = 5 }) // the clients ask for no length
	bin := tracekitBinary(t)
	png, err := media.Make(nil, &trace.Media{Kind: trace.MediaImage, Format: "png", Width: 32, Height: 24, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sig   syscall.Signal
		code  int
		stack string
	}{{syscall.SIGINT, ExitInterrupted, "native"}, {syscall.SIGTERM, ExitOK, "net/http"}} {
		out := t.TempDir()
		cmd := exec.Command(bin, "capture", "--listen", "127.0.0.1:0", "--upstream", up.URL(), "--out", out, "--proxy-stack", c.stack)
		stderr, _ := cmd.StderrPipe()
		var stdout strings.Builder
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		urls := make(chan string, 1)
		var log strings.Builder
		logDone := make(chan struct{})
		go func() {
			defer close(logDone)
			re := regexp.MustCompile(`^capture: (http://\S+) ->`)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					urls <- m[1]
				}
			}
		}()
		var base string
		select {
		case base = <-urls:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("capture printed no URL within 30 s")
		}
		for i := range 2 {
			body := `{"model":"tracekit-mock","messages":[{"role":"user","content":"q` + string(rune('0'+i)) + `"}],"stream":true,"max_tokens":5}`
			if i == 1 { // an image: its bytes go to the media file
				body = `{"model":"tracekit-mock","messages":[{"role":"user","content":[{"type":"text","text":"q1"},` +
					`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString(png) + `"}}]}],"stream":true,"max_tokens":5}`
			}
			resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cmd.Process.Signal(c.sig)
		done := make(chan error, 1)
		go func() { <-logDone; done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("capture did not stop within 30 s of %v", c.sig)
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(log.String(), "files complete") {
			t.Fatalf("%v: exit %d, want %d; stderr:\n%s", c.sig, code, c.code, log.String())
		}
		traces, _ := filepath.Glob(filepath.Join(out, "*.trace.parquet"))
		recs, _ := filepath.Glob(filepath.Join(out, "*.recording.parquet"))
		if len(traces) != 1 || len(recs) != 1 || !strings.Contains(stdout.String(), "2 requests") {
			t.Fatalf("%v: files %v %v, stdout %q", c.sig, traces, recs, stdout.String())
		}
		if n := len(readTurns(t, traces[0])); n != 2 {
			t.Fatalf("%v: trace has %d rows", c.sig, n)
		}
		if n := len(readRecords(t, recs[0])); n != 2 {
			t.Fatalf("%v: recording has %d rows", c.sig, n)
		}
		media := trace.MediaPath(traces[0])
		if !strings.Contains(stdout.String(), ", media "+media) {
			t.Fatalf("%v: stdout %q names no media file %s", c.sig, stdout.String(), media)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 3 { // the trace, its media file, the recording: no journal or partial left
			t.Fatalf("%v: %d files in --out: %v", c.sig, len(entries), entries)
		}
	}
}
