package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/sweep"
	"github.com/tracekit/tracekit/trace"
)

// sweep --repeat 3: every step runs three times into STEP-1..STEP-3, a run
// set analyze and compare take by the step's name; the step's throughput
// is the mean of its runs' with their t-interval (checked by hand), its
// request count their sum; the prefix cache is reset before every run;
// the text, HTML and sweep.json (validated against the schema by runCLI)
// carry the intervals.
func TestSweepRepeat(t *testing.T) {
	srv := sweepMock(t)
	tr := sweepTrace(t, 12, 40)
	out := filepath.Join(t.TempDir(), "sweep")
	stdout, stderr, code := runCLI(t, "sweep", tr, "--target", srv.URL(), "--out", out, "--speed", "1,2", "--step-requests", "12",
		"--ignore-eos", "--max-client-lag", "1s", "--max-client-cpu", "1", "--repeat", "3", "--run-cooldown", "10ms", "--reset-prefix-cache")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"step 1 run 1 (ladder 1/2)", "step 1 run 3 (ladder 1/2)", "step 2 run 2 (ladder 2/2)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "runs:     3 per step") {
		t.Errorf("the table lacks the runs per step:\n%s", stdout)
	}
	s, err := sweep.ReadSummary(out)
	if err != nil || len(s.Steps) != 2 {
		t.Fatalf("sweep.json: %+v %v", s, err)
	}
	for _, st := range s.Steps {
		name := sweep.StepName(st.Index, st.Load)
		set := analyze.FindRunSet(filepath.Join(out, name+".parquet"))
		if len(set) != 3 {
			t.Fatalf("step %d: runs %v, want %s-1..3.parquet", st.Index, set, name)
		}
		for i, p := range set {
			recs, meta, err := trace.ReadRecords(p)
			if err != nil || len(recs) != 12 || meta.Config["reset_prefix_cache"] != true {
				t.Errorf("step %d run %d: %d records, reset_prefix_cache %v, %v", st.Index, i+1, len(recs), meta.Config["reset_prefix_cache"], err)
			}
		}
		r := st.Repeat
		if r == nil || r.Runs != 3 || len(r.Throughput.Values) != 3 || r.Set == nil || len(r.Set.Runs) != 3 {
			t.Fatalf("step %d: repeat %+v", st.Index, r)
		}
		v := r.Throughput.Values
		mean := (v[0] + v[1] + v[2]) / 3
		sd := math.Sqrt(((v[0]-mean)*(v[0]-mean) + (v[1]-mean)*(v[1]-mean) + (v[2]-mean)*(v[2]-mean)) / 2)
		half := 4.302653 * sd / math.Sqrt(3)
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }
		if !near(st.Throughput, mean) || !near(r.Throughput.Mean, mean) || !near(r.Throughput.CILow, mean-half) || !near(r.Throughput.CIHigh, mean+half) || mean <= 0 {
			t.Errorf("step %d: throughput %g, interval %+v; by hand from %v: mean %g CI ±%g", st.Index, st.Throughput, r.Throughput, v, mean, half)
		}
		if st.Requests != 36 || st.Recording != name+".parquet" || st.Report != name+".html" {
			t.Errorf("step %d: %d requests, recording %q, report %q: want 36 over the runs and the set's names", st.Index, st.Requests, st.Recording, st.Report)
		}
		if page, err := os.ReadFile(filepath.Join(out, name+".html")); err != nil || !strings.Contains(string(page), "P99 TTFT (ms)") {
			t.Errorf("step %d: the set's report: %v", st.Index, err)
		}
	}
	if page, err := os.ReadFile(filepath.Join(out, sweep.SummaryHTML)); err != nil || !strings.Contains(string(page), `id="runs"`) {
		t.Errorf("sweep.html lacks the runs table: %v", err)
	}
	// The step's name stands for its runs.
	step2 := filepath.Join(out, sweep.StepName(2, s.Steps[1].Load)+".parquet")
	if o, e, code := runCLI(t, "analyze", step2); code != ExitOK || !strings.Contains(o, "Run set: 3 runs") {
		t.Errorf("analyze STEP: exit %d\n%s%s", code, o, e)
	}
	if o, e, code := runCLI(t, "compare", filepath.Join(out, sweep.StepName(1, s.Steps[0].Load)+".parquet"), step2); code != ExitOK || !strings.Contains(o, "Comparison of run sets") {
		t.Errorf("compare STEP STEP: exit %d\n%s%s", code, o, e)
	}
	if _, stderr, code := runCLI(t, "sweep", tr, "--target", srv.URL(), "--out", filepath.Join(t.TempDir(), "x"), "--speed", "1", "--repeat", "0"); code != ExitUsage || !strings.Contains(stderr, "--repeat 0") {
		t.Errorf("--repeat 0: exit %d: %s", code, stderr)
	}
}
