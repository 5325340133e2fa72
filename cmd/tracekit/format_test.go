package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
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

// roundedDuration matches a duration of at most 4 significant digits.
func roundedDuration(s string) bool {
	m := regexp.MustCompile(`^([0-9.]+)(ns|µs|ms|s)$`).FindStringSubmatch(s)
	return m != nil && len(strings.TrimLeft(strings.ReplaceAll(m[1], ".", ""), "0")) <= 4
}

// The mock's stop line rounds its lateness figures.
func TestMockStopLineRounded(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(tracekitBinary(t), "mock", "--listen", "127.0.0.1:0", "--ready-file", ready, "--decode-base", "1ms", "--prefill-base", "1ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var url string
	waitFor(t, 30*time.Second, func() bool {
		r, err := mock.ReadReadyFile(ready)
		url = r.URL
		return err == nil
	})
	for range 3 {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"tracekit-mock","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":20}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, &stderr); code != ExitInterrupted {
		t.Fatalf("mock: exit %d: %s", code, stderr.String())
	}
	m := regexp.MustCompile(`stopped after 3 requests, [1-9]\d* events, event lateness p50 (\S+) p99 (\S+) max (\S+)\n`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no stop line in %q", stderr.String())
	}
	for _, d := range m[1:] {
		if !roundedDuration(d) {
			t.Errorf("stop line %q: %s is not rounded", m[0], d)
		}
	}
}

// inspect lists a trace's models with their turns, not a Go map.
func TestInspectModelsListed(t *testing.T) {
	var turns []trace.Turn
	for i, model := range []string{"tracekit-mock", "small", "tracekit-mock", "tracekit-mock"} {
		turns = append(turns, trace.Turn{ConversationID: string(rune('a' + i)), Model: model, InputTokens: 1, OutputTokens: 1,
			Messages: []trace.Message{{Role: "user", Content: "x", Tokens: 1}}})
	}
	path := filepath.Join(t.TempDir(), "t.parquet")
	if err := trace.WriteTrace(path, trace.TraceMeta{Tokenizer: "o200k_base"}, turns); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "inspect", path)
	if code != ExitOK || !strings.Contains(out, "  models              tracekit-mock (3 turns), small (1 turn)\n") {
		t.Errorf("exit %d: %s%s", code, out, stderr)
	}
}

// compare prints counts as whole numbers, rates and times with decimals.
func TestCompareCountsWhole(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")
	writeRun(t, a, 100)
	writeRun(t, b, 150)
	out, stderr, code := runCLI(t, "compare", a, b)
	for _, re := range []string{`Successful requests +10 +10 +\+0 `, `Total generated tokens +30 +30 +\+0 `, `Peak concurrent requests +\d+ +\d+ +[+-]\d+ `,
		`Mean TTFT \(ms\) +100\.00 +150\.00 +\+50\.00 `} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("compare output lacks %s: exit %d\n%s%s", re, code, out, stderr)
		}
	}
}

// --max-trace-bytes shows its default as a size and takes size suffixes.
func TestMaxTraceBytesSize(t *testing.T) {
	out, _, _ := runCLI(t, "replay", "--help")
	if !strings.Contains(out, "(default 4GiB)") {
		t.Errorf("replay --help does not show --max-trace-bytes as 4GiB:\n%s", out)
	}
	path := processTrace(t, "u", 20, 2, time.Millisecond, 0, 3)
	body, _ := os.ReadFile(path)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	_, stderr, code := runCLI(t, "replay", srv.URL+"/trace.parquet", "--target", "http://127.0.0.1:1", "-o", filepath.Join(t.TempDir(), "r.parquet"),
		"--max-trace-bytes", "1KiB", "--progress", "none")
	if code != ExitUsage || !strings.Contains(stderr, "limit of 1024") {
		t.Errorf("a trace above --max-trace-bytes 1KiB: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "replay", path, "--target", "http://x", "--max-trace-bytes", "lots"); code != ExitUsage || !strings.Contains(stderr, "--max-trace-bytes") {
		t.Errorf("--max-trace-bytes lots: exit %d, stderr %q", code, stderr)
	}
}

// A client health warning is printed once: by the analysis replay prints
// at the end, or, without it, by replay itself.
func TestReplayHealthWarningOnce(t *testing.T) {
	srv := processMock(t, time.Millisecond)
	// Open loop, 1,200 turns all due at once on a small machine: many
	// leave late (dispatch lag) and the scheduler lags, so the run's
	// health says so.
	path := processTrace(t, "w", 400, 3, 0, 0, 2)
	warning := regexp.MustCompile(`(?m)^(?:warning: |WARNING: [^:]*\.parquet: )(.*)$`)
	for _, extra := range [][]string{nil, {"--no-analyze"}} {
		out := filepath.Join(t.TempDir(), "r.parquet")
		stdout, stderr, code := runCLI(t, append([]string{"replay", path, "--target", srv.URL(), "-o", out, "--timing", "trace",
			"--ignore-eos", "--progress", "none"}, extra...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		seen := map[string]int{}
		for _, m := range warning.FindAllStringSubmatch(stdout+"\n"+stderr, -1) {
			if !strings.HasPrefix(m[1], "recorded send delay") { // the analysis' own, from the records
				seen[m[1]]++
			}
		}
		if len(seen) == 0 {
			t.Fatalf("%v: the run's health gave no warning to count:\n%s\n%s", extra, stdout, stderr)
		}
		for w, n := range seen {
			if n != 1 {
				t.Errorf("%v: %q printed %d times, want once", extra, w, n)
			}
		}
	}
}
