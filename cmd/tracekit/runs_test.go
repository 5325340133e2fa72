package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// replay --num-runs 3 against the mock: three complete recordings, and an
// aggregate whose means equal the means of the three single-run analyses
// (read from analyze --json) and whose intervals match a hand computation
// with t(0.975, 2) = 4.302653. compare takes the set by its -o name.
func TestReplayNumRuns(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "4", "--turns", "2", "--input-tokens", "40", "--output-tokens", "16",
		"--rate", "0", "--seed", "1", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(time.Millisecond) })
	out := filepath.Join(dir, "run.parquet")
	stdout, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", out, "--num-runs", "3", "--run-cooldown", "10ms",
		"--progress", "none", "--no-probe", "--ignore-eos")
	if code != ExitOK {
		t.Fatalf("replay --num-runs 3: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "Run set: 3 runs") || !strings.Contains(stdout, "95% CI of mean") {
		t.Errorf("replay's output lacks the aggregate:\n%s", stdout)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written: the runs go to OUT-1..OUT-3 only", out)
	}
	// Each run analyzed alone.
	var single [3]map[string]any
	for i := range 3 {
		p := analyze.RunPath(out, i+1)
		recs, _, err := trace.ReadRecords(p)
		if err != nil || len(recs) != 8 {
			t.Fatalf("run %d: %d records, %v: want a valid recording of all 8 requests", i+1, len(recs), err)
		}
		js := filepath.Join(dir, "single.json")
		if _, stderr, code := runCLI(t, "analyze", p, "--json", js, "-q", "--metrics", "ttft,tpot,itl,e2el"); code != ExitOK {
			t.Fatalf("analyze %s: exit %d: %s", p, code, stderr)
		}
		b, err := os.ReadFile(js)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &single[i]); err != nil {
			t.Fatal(err)
		}
		os.Remove(js)
	}
	// The aggregate from the set's name.
	agg, html := filepath.Join(dir, "agg.json"), filepath.Join(dir, "agg.html")
	if stdout, stderr, code := runCLI(t, "analyze", out, "--runs", "--json", agg, "--html", html); code != ExitOK || !strings.Contains(stdout, "Run set: 3 runs") {
		t.Fatalf("analyze --runs: exit %d: %s\n%s", code, stderr, stdout)
	}
	var rs analyze.RunSet
	b, err := os.ReadFile(agg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs.Runs) != 3 || rs.Confidence != 0.95 || math.Abs(rs.TCritical-4.302653) > 1e-5 {
		t.Fatalf("aggregate header: runs %v, confidence %g, t %g", rs.Runs, rs.Confidence, rs.TCritical)
	}
	byMetric := map[string]analyze.RunStat{}
	for _, m := range rs.Metrics {
		byMetric[m.Metric] = m
	}
	for metric, key := range map[string]string{
		"ttft.mean": "mean_ttft_ms", "ttft.p99": "p99_ttft_ms", "itl.median": "median_itl_ms", "tpot.p99": "p99_tpot_ms",
		"e2el.mean": "mean_e2el_ms", "output_throughput": "output_throughput", "request_throughput": "request_throughput",
	} {
		m, ok := byMetric[metric]
		if !ok {
			t.Errorf("aggregate lacks %s", metric)
			continue
		}
		var v [3]float64
		for i := range 3 {
			v[i] = single[i][key].(float64)
		}
		mean := (v[0] + v[1] + v[2]) / 3
		sd := math.Sqrt(((v[0]-mean)*(v[0]-mean) + (v[1]-mean)*(v[1]-mean) + (v[2]-mean)*(v[2]-mean)) / 2)
		half := rs.TCritical * sd / math.Sqrt(3)
		// Relative to the mean's size: an interval's end near 0 is as
		// exact as its mean.
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(mean)+half) }
		if !near(m.Mean, mean) || !near(m.StdDev, sd) || !near(m.CILow, mean-half) || !near(m.CIHigh, mean+half) {
			t.Errorf("%s: mean %g sd %g CI [%g, %g]; by hand from %v: mean %g sd %g CI [%g, %g]",
				metric, m.Mean, m.StdDev, m.CILow, m.CIHigh, v, mean, sd, mean-half, mean+half)
		}
		if mean <= 0 {
			t.Errorf("%s: mean %g: the runs measured nothing", metric, mean)
		}
	}
	if h, err := os.ReadFile(html); err != nil || !bytes.Contains(h, []byte("P99 TTFT (ms)")) {
		t.Errorf("HTML report: %v, lacks the P99 TTFT row", err)
	}
	// Again on the same -o: refused before anything runs, naming run 1.
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", out, "--num-runs", "3", "--progress", "none", "--no-probe"); code != ExitUsage || !strings.Contains(stderr, "run-1.parquet exists") {
		t.Errorf("second set on the same -o: exit %d: %s", code, stderr)
	}
	// compare: the set against itself passes even a zero threshold with
	// --beyond-ci, and against one of its runs prints the set table.
	if stdout, stderr, code := runCLI(t, "compare", out, out, "--fail-on", "ttft.p99>+0%", "--beyond-ci"); code != ExitOK || !strings.Contains(stdout, "Comparison of run sets") {
		t.Errorf("compare set with itself: exit %d: %s\n%s", code, stderr, stdout)
	}
	if stdout, stderr, code := runCLI(t, "compare", analyze.RunPath(out, 1), out); code != ExitOK || !strings.Contains(stdout, "A: "+analyze.RunPath(out, 1)+" (1 run)") {
		t.Errorf("compare run with set: exit %d: %s\n%s", code, stderr, stdout)
	}
	// A set against a set decoding thirty times slower: the mean TPOT
	// change clears both intervals, so --beyond-ci fails it (exit 1,
	// naming it). Mean TPOT, not an ITL percentile: a starved mock writes
	// some tokens in bursts, which moves a run's ITL median, while the
	// mean time per token is the mock's decode time however it batches.
	slowSrv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(30 * time.Millisecond) })
	slow := filepath.Join(dir, "slow.parquet")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", slowSrv.URL(), "-o", slow, "--num-runs", "3",
		"--progress", "none", "--no-probe", "--ignore-eos", "--no-analyze"); code != ExitOK {
		t.Fatalf("slow set: exit %d: %s", code, stderr)
	}
	verdict := filepath.Join(dir, "verdict.json")
	if stdout, stderr, code := runCLI(t, "compare", out, slow, "--fail-on", "tpot.mean>+10%", "--beyond-ci", "--verdict", verdict); code != ExitFailed ||
		!strings.Contains(stderr, "tpot.mean>+10%") || !strings.Contains(stdout, "disjoint") {
		t.Errorf("slower set: exit %d, stderr %q: want 1 naming the TPOT condition\n%s", code, stderr, stdout)
	}
	var v analyze.GateVerdict
	if b, err := os.ReadFile(verdict); err != nil || json.Unmarshal(b, &v) != nil || v.Passed || len(v.Conditions) != 1 || !v.Conditions[0].Failed {
		t.Errorf("verdict: %+v, %v", v, err)
	}
	if _, stderr, code := runCLI(t, "analyze", out, "--runs", "--confidence", "1.5"); code != ExitUsage || !strings.Contains(stderr, "--confidence") {
		t.Errorf("--confidence 1.5: exit %d: %s", code, stderr)
	}
}

// SIGINT during the second run of a set: exit 130, run 1 complete and
// valid with every request, run 2 a valid recording cut short, no run 3.
func TestReplayNumRunsInterrupted(t *testing.T) {
	bin := tracekitBinary(t)
	srv := processMock(t, 20*time.Millisecond)
	path := processTrace(t, "g", 6, 5, 10*time.Millisecond, 0, 10)
	out := filepath.Join(t.TempDir(), "rec.parquet")
	cmd := exec.Command(bin, "replay", path, "--target", srv.URL(), "-o", out, "--ignore-eos", "--num-runs", "3",
		"--progress", "none", "--no-probe")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Run 1 has all 30 requests; 8 more are of run 2.
	waitFor(t, 60*time.Second, func() bool { return len(srv.Log()) >= 38 })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitInterrupted {
			t.Errorf("%v, want exit code 130\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("tracekit did not exit 20 s after SIGINT; output:\n%s", stderr.String())
	}
	recs, _, err := trace.ReadRecords(analyze.RunPath(out, 1))
	if err != nil {
		t.Fatalf("run 1: %v", err)
	}
	for _, r := range recs {
		if r.ErrorKind != "" {
			t.Errorf("run 1, %s: error %q", r.RequestID, r.ErrorKind)
		}
	}
	if len(recs) != 30 {
		t.Errorf("run 1: %d records, want all 30", len(recs))
	}
	recs2, _, err := trace.ReadRecords(analyze.RunPath(out, 2))
	if err != nil || len(recs2) >= 30 {
		t.Errorf("run 2: %d records, %v: want a valid recording cut short", len(recs2), err)
	}
	if _, err := os.Stat(analyze.RunPath(out, 3)); err == nil {
		t.Error("run 3 was written after the interrupt")
	}
	if !strings.Contains(stderr.String(), "run 2 of 3") {
		t.Errorf("output does not name run 2:\n%s", stderr.String())
	}
}

// compare --html writes the page of two run sets; two single recordings
// have no such page (exit 2 naming --html).
func TestCompareRunSetsHTMLPage(t *testing.T) {
	tr, target := replayFixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "run.parquet")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", target, "--model", "tracekit-mock", "-o", out, "--num-runs", "2",
		"--progress", "none", "--no-probe", "--no-analyze"); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	page := filepath.Join(dir, "compare.html")
	if _, stderr, code := runCLI(t, "compare", out, out, "--html", page); code != ExitOK {
		t.Fatalf("compare --html: exit %d: %s", code, stderr)
	}
	h, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="variance-a"><b>Run-to-run variance over 2 runs:`, `<svg class="chart" id="runs-ttft"`, `data-series="B median"`, "<dt>trace SHA-256</dt>"} {
		if !bytes.Contains(h, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
	one := analyze.RunPath(out, 1)
	if _, stderr, code := runCLI(t, "compare", one, analyze.RunPath(out, 2), "--html", filepath.Join(dir, "x.html")); code != ExitUsage || !strings.Contains(stderr, "--html") {
		t.Errorf("compare --html of two recordings: exit %d: %s", code, stderr)
	}
}

// --repeat resets the prefix cache before every run of a set, not only the
// first: against a caching mock each run of the set sees the cache of
// its own requests only, so every request's cached tokens repeat run to
// run; without the reset (and through the --num-runs alias) the second
// run finds the first run's prompts cached. The set's -o name then
// stands for its runs in analyze (no --runs needed) and inspect.
func TestReplayRepeatResetsPrefixCacheEveryRun(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "3", "--turns", "2", "--input-tokens", "300", "--output-tokens", "4",
		"--rate", "0", "--seed", "3", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	caching := func(c *mock.Config) { c.Latency.PrefixCacheTokens = 1 << 20 }
	srv := mocktest.Start(t, caching)
	cached := func(out string, run int) (map[string]int32, int64) {
		t.Helper()
		recs, _, err := trace.ReadRecords(analyze.RunPath(out, run))
		if err != nil || len(recs) != 6 {
			t.Fatalf("run %d of %s: %d records, %v", run, out, len(recs), err)
		}
		m, sum := map[string]int32{}, int64(0)
		for _, r := range recs {
			m[r.RequestID] = r.CachedTokens
			sum += int64(r.CachedTokens)
		}
		return m, sum
	}
	reset := filepath.Join(dir, "reset.parquet")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", reset, "--repeat", "2", "--reset-prefix-cache",
		"--max-concurrency", "1", "--progress", "none", "--no-probe", "--ignore-eos", "--no-analyze"); code != ExitOK {
		t.Fatalf("replay --repeat 2 --reset-prefix-cache: exit %d: %s", code, stderr)
	}
	first, _ := cached(reset, 1)
	second, _ := cached(reset, 2)
	for id, n := range first {
		if second[id] != n {
			t.Errorf("%s: %d cached tokens in run 1, %d in run 2: the cache was not reset between runs", id, n, second[id])
		}
	}
	kept := filepath.Join(dir, "kept.parquet")
	srv = mocktest.Start(t, caching) // an empty cache
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", kept, "--num-runs", "2", "--reset-prefix-cache=false",
		"--max-concurrency", "1", "--progress", "none", "--no-probe", "--ignore-eos", "--no-analyze"); code != ExitOK {
		t.Fatalf("replay --num-runs 2: exit %d: %s", code, stderr)
	}
	_, sum1 := cached(kept, 1)
	_, sum2 := cached(kept, 2)
	if sum2 <= sum1 {
		t.Errorf("without a reset run 2 found %d cached tokens, run 1 %d: want more (run 1's prompts cached)", sum2, sum1)
	}
	// The set's -o name in analyze and inspect.
	if stdout, stderr, code := runCLI(t, "analyze", reset); code != ExitOK || !strings.Contains(stdout, "Run set: 2 runs") {
		t.Errorf("analyze SET: exit %d: %s\n%s", code, stderr, stdout)
	}
	stdout, stderr, code := runCLI(t, "inspect", reset)
	if code != ExitOK || !strings.Contains(stdout, analyze.RunPath(reset, 1)) || !strings.Contains(stdout, analyze.RunPath(reset, 2)) {
		t.Errorf("inspect SET: exit %d: %s\n%s", code, stderr, stdout)
	}
}
