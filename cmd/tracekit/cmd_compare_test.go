package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// compare --fail-on as a CI gate: the same trace replayed against a mock
// and against one that decodes 25 times slower. The slower run fails an
// ITL condition (exit 1, naming it), a run against itself passes (exit 0),
// and a malformed condition is bad usage (exit 2) before anything is read.
func TestCompareFailOn(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "4", "--turns", "2", "--input-tokens", "40", "--output-tokens", "32",
		"--rate", "0", "--seed", "1", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	replayTo := func(name string, decode time.Duration) string {
		srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(decode) })
		out := filepath.Join(dir, name)
		if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", out, "--no-analyze", "--progress", "none", "--no-probe", "--ignore-eos"); code != ExitOK {
			t.Fatalf("replay: exit %d: %s", code, stderr)
		}
		return out
	}
	// 25 times slower: 2 turns of 32 tokens take 1.6 s at least against
	// 64 ms, a margin no stall of a loaded machine closes.
	base, slow := replayTo("base.parquet", time.Millisecond), replayTo("slow.parquet", 25*time.Millisecond)

	gate := "failed>+0,itl.median>+10%,output_throughput<-5%"
	verdict := filepath.Join(dir, "verdict.json")
	stdout, stderr, code := runCLI(t, "compare", base, slow, "--fail-on", gate, "--verdict", verdict)
	if code != ExitFailed || !strings.Contains(stderr, "itl.median>+10%") || !strings.Contains(stderr, "output_throughput<-5%") {
		t.Fatalf("slower decode: exit %d, stderr %q: want 1 naming the ITL and throughput conditions", code, stderr)
	}
	if strings.Contains(stderr, "failed>+0") {
		t.Errorf("the failed-requests condition (none failed) failed too: %s\n%s", stderr, stdout)
	}
	for _, want := range []string{"Gate (--fail-on)", "itl.median>+10%", "FAIL", "pass"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare's output lacks %q:\n%s", want, stdout)
		}
	}
	// The verdict file says the same.
	b, err := os.ReadFile(verdict)
	if err != nil {
		t.Fatal(err)
	}
	var v analyze.GateVerdict
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Passed || v.Base != base || v.New != slow || len(v.Conditions) != 3 {
		t.Fatalf("verdict %s", b)
	}
	for i, failed := range []bool{false, true, true} {
		c := v.Conditions[i]
		if c.Failed != failed || c.Change == nil {
			t.Errorf("verdict condition %s: failed %v change %v, want failed %v", c.Text, c.Failed, c.Change, failed)
		}
	}
	if c := v.Conditions[1]; c.Metric != "itl.median" || !c.Relative || c.Threshold != 10 || *c.Change <= 10 || c.B <= c.A {
		t.Errorf("itl condition in the verdict: %+v", c)
	}
	if _, stderr, code := runCLI(t, "compare", base, slow, "--verdict", verdict); code != ExitUsage || !strings.Contains(stderr, "--verdict") {
		t.Errorf("--verdict without --fail-on: exit %d, stderr %q", code, stderr)
	}
	// The same run twice changes nothing.
	if stdout, stderr, code := runCLI(t, "compare", base, base, "--fail-on", gate); code != ExitOK || strings.Contains(stdout, "FAIL") {
		t.Errorf("a run against itself: exit %d: %s\n%s", code, stderr, stdout)
	}
	// The other way round the ITL improved: only an absolute condition on
	// it going down fails.
	if _, stderr, code := runCLI(t, "compare", slow, base, "--fail-on", "itl.median>+0", "--fail-on", "itl.median<-1"); code != ExitFailed ||
		!strings.Contains(stderr, "itl.median<-1") || strings.Contains(stderr, "itl.median>+0") {
		t.Errorf("faster run: exit %d, stderr %q", code, stderr)
	}
	for _, bad := range []string{"ttft.p99", "ttft.p99>ten%", "nosuch.p99>+1%", "ttft.p101>+1%", "ttft.avg>+1%", ">+1%"} {
		if _, stderr, code := runCLI(t, "compare", base, slow, "--fail-on", bad); code != ExitUsage || !strings.Contains(stderr, "--fail-on") {
			t.Errorf("--fail-on %q: exit %d, stderr %q: want 2 naming the flag", bad, code, stderr)
		}
	}
	// A percentile the runs did not compute is bad usage too.
	if _, stderr, code := runCLI(t, "compare", base, slow, "--percentiles", "50,99", "--fail-on", "ttft.p90>+1%"); code != ExitUsage || !strings.Contains(stderr, "p90") && !strings.Contains(stderr, "percentile 90") {
		t.Errorf("uncomputed percentile: exit %d, stderr %q", code, stderr)
	}
}
