package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An empty --streams is the empty list (no stream steps), not a malformed count:
// alone it leaves calibrate without a step, said as such; a word is
// refused naming the flag.
func TestCalibrateStreamsEmptyList(t *testing.T) {
	if _, stderr, code := runCLI(t, "calibrate", "--streams", "", "--mock", "inprocess"); code != ExitUsage || !strings.Contains(stderr, "no step: give --streams") {
		t.Errorf("--streams '': exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "calibrate", "--streams", "10,many", "--mock", "inprocess"); code != ExitUsage ||
		!strings.Contains(stderr, "--streams") || !strings.Contains(stderr, `"many" is not a whole number`) {
		t.Errorf("--streams 10,many: exit %d: %s", code, stderr)
	}
}

// --media-requests runs the media step from the command line: both runs'
// text events all matched, every media request sent with its body and
// none failed, in the text report and in --json's file; a size or check the
// step cannot take is refused naming its flag, before anything runs.
func TestCalibrateMediaStep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replays")
	}
	js := filepath.Join(t.TempDir(), "media.json")
	stdout, stderr, code := runCLI(t, "calibrate", "--media-requests", "12", "--media-bytes", "64KiB", "--media-streams", "4",
		"--duration", "2s", "--mock", "inprocess", "--json", js)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
	for _, want := range []string{"media step: 4 text streams", "beside 12 requests", "alone", "beside the media", "per-event error p99"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "FAILED") {
		t.Errorf("the report says a failure:\n%s", stdout)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		ImageBytes int `json:"image_bytes"`
		Alone      struct {
			Matched, EventsServer, Errors, MediaSent int
		} `json:"alone"`
		WithMedia struct {
			Matched        int   `json:"matched"`
			EventsServer   int   `json:"events_server"`
			Errors         int   `json:"errors"`
			MediaSent      int   `json:"media_sent"`
			MediaErrors    int   `json:"media_errors"`
			MediaBodyBytes int64 `json:"media_body_bytes"`
		} `json:"with_media"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, b)
	}
	m := rep.WithMedia
	if m.Matched == 0 || m.Matched != m.EventsServer || m.Errors != 0 {
		t.Errorf("beside the media: %d of %d text events matched, %d failed requests", m.Matched, m.EventsServer, m.Errors)
	}
	if m.MediaSent != 12 || m.MediaErrors != 0 || m.MediaBodyBytes < 12*int64(rep.ImageBytes)*4/3 {
		t.Errorf("media requests: %d sent, %d failed, %d body bytes for a %d-byte image", m.MediaSent, m.MediaErrors, m.MediaBodyBytes, rep.ImageBytes)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--media-bytes", "100MiB"}, "--media-bytes"},
		{[]string{"--media-check", "pixels"}, "--media-check"},
		{[]string{"--media-streams", "0"}, "--media-streams"},
		{[]string{"--target", "http://127.0.0.1:1"}, "--target"},
	} {
		args := append([]string{"calibrate", "--media-requests", "5", "--mock", "inprocess"}, c.args...)
		if _, stderr, code := runCLI(t, args...); code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d naming %s: %s", c.args, code, ExitUsage, c.want, stderr)
		}
	}
}

// SIGINT to a real `tracekit calibrate` process, in the ladder and in the
// media step: exit 130, as every command that a signal ends; a media flag
// without --media-requests is refused before anything runs.
func TestCalibrateInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts calibrate processes")
	}
	bin := tracekitBinary(t)
	for _, c := range []struct {
		args []string
		wait string // a progress line printed once a step runs
	}{
		{[]string{"--streams", "20", "--duration", "60s"}, "streams"},
		{[]string{"--media-requests", "5", "--media-streams", "4", "--duration", "60s", "--media-bytes", "64KiB"}, "media step: probe"},
	} {
		cmd := exec.Command(bin, append([]string{"calibrate", "--mock", "inprocess"}, c.args...)...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		sc := bufio.NewScanner(stderr)
		seen := false
		for !seen && sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			seen = strings.Contains(sc.Text(), c.wait)
		}
		if !seen {
			cmd.Wait()
			t.Fatalf("%v: no %q line before calibrate ended:\n%s", c.args, c.wait, log.String())
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, stderr)
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: no exit within 60 s of SIGINT:\n%s", c.args, log.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != ExitInterrupted {
			t.Errorf("%v: exit %d after SIGINT, want %d:\n%s", c.args, code, ExitInterrupted, log.String())
		}
	}
	if _, stderr, code := runCLI(t, "calibrate", "--media-bytes", "1MiB", "--mock", "inprocess"); code != ExitUsage || !strings.Contains(stderr, "give --media-requests") {
		t.Errorf("--media-bytes alone: exit %d: %s", code, stderr)
	}
}
