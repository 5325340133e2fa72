package sweep

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// fake is a deployment of known capacity: below capacity (in load units)
// it serves the offered load with a TTFT p99 of 20 ms; above it it serves
// capacity and TTFT grows with the backlog. distorted marks loads at which
// the client "distorts" the step.
type fake struct {
	capacity  float64
	perLoad   float64 // req/s per load unit
	distorted func(load float64) bool
	loads     []float64
	cancelAt  int // cancel ctx during this step (1-based), 0 never
	cancel    context.CancelFunc
}

func (f *fake) Step(ctx context.Context, spec StepSpec) (StepResult, error) {
	f.loads = append(f.loads, spec.Load.Value)
	l := spec.Load.Value
	ttft := 20.0
	if l > f.capacity {
		ttft += 1000 * (l/f.capacity - 1)
	}
	r := StepResult{
		Requests: 100, Completed: 100, Good: 100, GoodFraction: 1,
		OfferedRate: l * f.perLoad, Throughput: min(l, f.capacity) * f.perLoad,
		OfferedConvRate: l * f.perLoad,
		TTFT:            Dist{P50: ttft / 2, P90: ttft * 0.9, P99: ttft},
		Checks:          []Check{{Metric: MetricTTFT, P: 99, ThresholdMs: 500, ValueMs: ttft, Samples: 100}},
	}
	if ttft > 500 {
		r.Good, r.GoodFraction = 0, 0
	}
	if f.distorted != nil && f.distorted(l) {
		r.DispatchLagP99Ms = 50
	}
	if f.cancelAt == spec.Index {
		f.cancel()
		r.Interrupted = true
	}
	return r, nil
}

func searchCfg(start, lo, hi float64) Config {
	return Config{
		Plan:     Plan{Axis: AxisSpeed, Search: &SearchSpec{Start: start, Min: lo, Max: hi, Resolution: 0.05}},
		Criteria: Criteria{SLO: SLO{{Metric: MetricTTFT, P: 99, Threshold: 500 * time.Millisecond}}, MaxErrorRate: 0.01},
	}
}

// The TTFT objective of the fake breaks at 1.5 x capacity (20 ms + 1000 ms
// x (l/c - 1) > 500 ms), so the answer is the highest load <= 1.48 c.
func fakeAnswer(c float64) float64 { return c * (1 + 480.0/1000) }

// From speed 1, the search reaches 5% resolution in at most 8 steps for
// any answer up to 8x the start (bracket 1, 2, 4, 8 and four bisections),
// and the answer and its bounds bracket the fake's true limit.
func TestSearchFindsAnswerWithin8Steps(t *testing.T) {
	for _, c := range []float64{0.8, 1.1, 1.7, 2.6, 3.3, 4.05} {
		f := &fake{capacity: c, perLoad: 10}
		sum, err := Run(context.Background(), f, searchCfg(1, 1.0/64, 1024))
		if err != nil {
			t.Fatal(err)
		}
		truth := fakeAnswer(c)
		a := sum.Answer
		if a == nil || !a.Found || a.Upper == 0 {
			t.Fatalf("capacity %g: no bounded answer: %+v (loads %v)", c, a, f.loads)
		}
		up := sum.step(a.Upper).Load.Value
		if !(a.Load <= truth && truth < up) {
			t.Errorf("capacity %g: answer %g and upper %g do not bracket the limit %g", c, a.Load, up, truth)
		}
		if up/a.Load-1 > 0.05 || !a.Resolved {
			t.Errorf("capacity %g: bounds %g-%g are %.1f%% apart, want <= 5%%", c, a.Load, up, 100*(up/a.Load-1))
		}
		if len(f.loads) > 8 {
			t.Errorf("capacity %g (limit %g): %d steps %v, want <= 8", c, truth, len(f.loads), f.loads)
		}
		if !sum.step(a.Lower).Pass || sum.step(a.Upper).Pass {
			t.Errorf("capacity %g: lower must pass and upper fail", c)
		}
	}
}

// A failing start halves down until a load passes; a search whose every
// load fails reports no answer; one whose every load passes says so.
func TestSearchBracketsDownAndReportsEdges(t *testing.T) {
	f := &fake{capacity: 0.2, perLoad: 10}
	sum, err := Run(context.Background(), f, searchCfg(1, 1.0/64, 16))
	if err != nil {
		t.Fatal(err)
	}
	if f.loads[0] != 1 || f.loads[1] != 0.5 || f.loads[2] != 0.25 {
		t.Errorf("loads %v: expected halving from 1", f.loads)
	}
	if a := sum.Answer; !a.Found || a.Load > fakeAnswer(0.2) || sum.step(a.Upper).Load.Value <= fakeAnswer(0.2) {
		t.Errorf("answer %+v for limit %g", a, fakeAnswer(0.2))
	}

	f = &fake{capacity: 0.01, perLoad: 10}
	sum, _ = Run(context.Background(), f, searchCfg(1, 0.25, 16))
	if a := sum.Answer; a.Found || len(f.loads) != 3 || !strings.Contains(sum.AnswerLine(), "no load met the SLO") {
		t.Errorf("all failing: answer %+v, loads %v, line %q", a, f.loads, sum.AnswerLine())
	}

	f = &fake{capacity: 100, perLoad: 10}
	sum, _ = Run(context.Background(), f, searchCfg(1, 0.25, 16))
	if a := sum.Answer; !a.Found || a.Load != 16 || a.Upper != 0 || len(f.loads) != 5 {
		t.Errorf("all passing: answer %+v, loads %v", a, f.loads)
	}
}

// A distorted step is never the answer: the search treats it as not
// passing and the answer notes that its upper bound was distorted.
func TestDistortedStepIsNeverTheAnswer(t *testing.T) {
	f := &fake{capacity: 10, perLoad: 10, distorted: func(l float64) bool { return l > 3 }}
	sum, err := Run(context.Background(), f, searchCfg(1, 0.25, 64))
	if err != nil {
		t.Fatal(err)
	}
	a := sum.Answer
	if !a.Found || a.Load > 3 {
		t.Fatalf("answer %+v: expected at most 3, below the distorted loads", a)
	}
	for _, r := range sum.Steps {
		if r.Load.Value > 3 && (!r.Distorted || r.Pass || r.Verdict != VerdictDistorted) {
			t.Errorf("step %d at %g: distorted %v pass %v verdict %q", r.Index, r.Load.Value, r.Distorted, r.Pass, r.Verdict)
		}
	}
	if up := sum.step(a.Upper); up == nil || !up.Distorted || !strings.Contains(strings.Join(a.Notes, " "), "distorted") {
		t.Errorf("the upper bound should be a distorted step, noted: %+v", a)
	}
	// The knee ignores distorted steps.
	if sum.Knee == nil || sum.step(sum.Knee.Step).Distorted {
		t.Errorf("knee %+v", sum.Knee)
	}
}

// When no load passes, the lowest load decides what the sweep says: met
// every objective but distorted, the client could not measure (no answer,
// Unmeasured, the figure named); failed an objective as well, no load met
// the SLO.
func TestNoPassingLoadUnmeasuredOrFailed(t *testing.T) {
	always := func(float64) bool { return true }
	sum, err := Run(context.Background(), &fake{capacity: 100, perLoad: 10, distorted: always}, searchCfg(1, 0.25, 64))
	if err != nil {
		t.Fatal(err)
	}
	a := sum.Answer
	if a.Found || !a.Unmeasured || sum.Unmeasured() == nil || !strings.Contains(a.Reason, "could not measure faithfully") ||
		!strings.Contains(a.Reason, "dispatch lag p99 50.00 ms") || strings.Contains(sum.AnswerLine(), "no load met") {
		t.Errorf("distorted, every objective met: answer %+v, line %q", a, sum.AnswerLine())
	}
	sum, _ = Run(context.Background(), &fake{capacity: 0.01, perLoad: 10, distorted: always}, searchCfg(1, 0.25, 64))
	if a := sum.Answer; a.Found || a.Unmeasured || sum.Unmeasured() != nil || a.Reason != "no load met the SLO" {
		t.Errorf("distorted and failing: answer %+v", a)
	}
	// A ladder without an SLO: the same verdict from the steps alone.
	cfg := Config{Plan: Plan{Axis: AxisSpeed, Ladder: []float64{1, 2}}, Criteria: Criteria{MaxErrorRate: 0.01}}
	sum, _ = Run(context.Background(), &fake{capacity: 100, perLoad: 10, distorted: always}, cfg)
	if r := sum.Unmeasured(); sum.Answer != nil || r == nil || r.Load.Value != 1 {
		t.Errorf("ladder without an SLO: unmeasured %+v", r)
	}
}

// A step that could not run (its target gone) stops the sweep with no
// answer, even though earlier loads passed: the reason names the error.
func TestStoppedSweepHasNoAnswer(t *testing.T) {
	f := &fake{capacity: 10, perLoad: 10}
	st := StepFunc(func(ctx context.Context, spec StepSpec) (StepResult, error) {
		if spec.Index == 3 {
			return StepResult{}, ErrUnreachable
		}
		return f.Step(ctx, spec)
	})
	sum, err := Run(context.Background(), st, searchCfg(1, 0.25, 64))
	if !errors.Is(err, ErrUnreachable) || len(sum.Steps) != 2 || !sum.Steps[1].Pass {
		t.Fatalf("err %v, steps %+v", err, sum.Steps)
	}
	a := sum.Answer
	if a.Found || a.Lower != 0 || !strings.Contains(a.Reason, "step 3") || !strings.Contains(a.Reason, ErrUnreachable.Error()) ||
		!strings.HasPrefix(sum.AnswerLine(), "unresolved: ") || !strings.Contains(strings.Join(a.Notes, " "), "step 2") {
		t.Errorf("answer %+v, line %q", a, sum.AnswerLine())
	}
}

// A load whose step the client distorted is run again; when the retry is
// clean its verdict stands and the search goes on as if nothing happened.
func TestRetryDistorted(t *testing.T) {
	runs := map[float64]int{}
	f := &fake{capacity: 3, perLoad: 10, distorted: func(l float64) bool { runs[l]++; return l == 2 && runs[l] == 1 }}
	cfg := searchCfg(1, 0.25, 64)
	cfg.RetryDistorted = 1
	sum, err := Run(context.Background(), f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.loads[1] != 2 || f.loads[2] != 2 || !sum.Steps[1].Distorted || sum.Steps[2].Distorted {
		t.Fatalf("loads %v: expected load 2 run twice, distorted then clean", f.loads)
	}
	a := sum.Answer
	if !a.Found || a.Load > fakeAnswer(3) || sum.step(a.Upper).Load.Value <= fakeAnswer(3) || !a.Resolved || len(a.Notes) != 0 {
		t.Errorf("answer %+v: the clean retry should stand", a)
	}

	// A distorted step that fails anyway is not run again.
	f = &fake{capacity: 3, perLoad: 10, distorted: func(l float64) bool { return l >= 8 }}
	sum, _ = Run(context.Background(), f, cfg)
	for i, l := range f.loads {
		if i > 0 && l == f.loads[i-1] {
			t.Errorf("loads %v: the failing distorted load %g was run again", f.loads, l)
		}
	}
	if a := sum.Answer; !a.Found || a.Load > fakeAnswer(3) {
		t.Errorf("answer %+v", a)
	}
}

// An integer axis bisects on whole numbers and stops when the bounds are
// adjacent.
func TestSearchConcurrencyIsInteger(t *testing.T) {
	f := &fake{capacity: 13, perLoad: 1}
	cfg := searchCfg(1, 1, 4096)
	cfg.Plan.Axis = AxisConcurrency
	sum, err := Run(context.Background(), f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range f.loads {
		if l != math.Trunc(l) {
			t.Errorf("load %g is not whole (loads %v)", l, f.loads)
		}
	}
	a := sum.Answer
	if !a.Found || a.Load != math.Floor(fakeAnswer(13)) || sum.step(a.Upper).Load.Value != a.Load+1 {
		t.Errorf("answer %+v (loads %v), want %g with upper +1", a, f.loads, math.Floor(fakeAnswer(13)))
	}
}

// A ladder runs every load lowest first; its answer is the highest passing
// load below the first failing one, and the knee is where throughput stops
// following the load.
func TestLadderAnswerAndKnee(t *testing.T) {
	f := &fake{capacity: 3, perLoad: 10}
	cfg := searchCfg(1, 1, 1)
	cfg.Plan.Search, cfg.Plan.Ladder = nil, []float64{0.5, 1, 2, 3, 4, 5, 8}
	var seen []int
	cfg.OnStep = func(s *Summary) { seen = append(seen, len(s.Steps)) }
	sum, err := Run(context.Background(), f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.loads) != 7 || len(seen) != 7 || seen[6] != 7 {
		t.Fatalf("loads %v, OnStep saw %v", f.loads, seen)
	}
	if a := sum.Answer; !a.Found || a.Load != 4 || sum.step(a.Upper).Load.Value != 5 {
		t.Errorf("answer %+v, want 4 bounded by 5", a)
	}
	k := sum.Knee
	if k == nil || k.Load != 3 || k.Throughput != 30 || !k.Reached || k.MaxThroughput != 30 {
		t.Errorf("knee %+v, want load 3 at 30 req/s, reached", k)
	}
}

// Canceling ctx mid-sweep keeps the finished steps, marks the interrupted
// one and runs no more; a stepper error stops the sweep with it.
func TestInterruptAndStepError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fake{capacity: 3, perLoad: 10, cancelAt: 3, cancel: cancel}
	sum, err := Run(ctx, f, searchCfg(1, 0.25, 64))
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Interrupted || len(sum.Steps) != 3 || sum.Steps[2].Verdict != VerdictInterrupted {
		t.Fatalf("interrupted %v, %d steps, last %q", sum.Interrupted, len(sum.Steps), sum.Steps[len(sum.Steps)-1].Verdict)
	}
	if a := sum.Answer; !a.Found || a.Load != 2 || a.Upper != 0 {
		t.Errorf("answer after interrupt %+v: the interrupted step is no verdict", a)
	}

	boom := errors.New("connection refused")
	calls := 0
	sum, err = Run(context.Background(), StepFunc(func(ctx context.Context, s StepSpec) (StepResult, error) {
		calls++
		if calls == 2 {
			return StepResult{}, boom
		}
		return (&fake{capacity: 9, perLoad: 1}).Step(ctx, s)
	}), searchCfg(1, 0.25, 64))
	if !errors.Is(err, boom) || len(sum.Steps) != 1 || !strings.Contains(sum.Error, "connection refused") {
		t.Errorf("err %v, steps %d, summary error %q", err, len(sum.Steps), sum.Error)
	}
}

// Judge applies every criterion, and the verdicts follow.
func TestJudge(t *testing.T) {
	c := Criteria{SLO: SLO{{Metric: MetricTTFT, P: 90, Threshold: 100 * time.Millisecond}}, GoodputTarget: 0.9, MaxErrorRate: 0.1}
	base := func() StepResult {
		return StepResult{Requests: 10, Completed: 10, GoodFraction: 1, Checks: []Check{{Metric: MetricTTFT, P: 90, ThresholdMs: 100, ValueMs: 100, Samples: 10}}}
	}
	for _, tc := range []struct {
		name    string
		mod     func(*StepResult)
		verdict string
		reason  string
	}{
		{"at the threshold passes", func(*StepResult) {}, VerdictPass, ""},
		{"above the threshold", func(r *StepResult) { r.Checks[0].ValueMs = 100.01 }, VerdictFail, "ttft p90 100.01 ms > 100.00 ms"},
		{"errors", func(r *StepResult) { r.ErrorRate = 0.2 }, VerdictFail, "error rate 20.00% > 10.00%"},
		{"goodput", func(r *StepResult) { r.GoodFraction = 0.8 }, VerdictFail, "goodput 80.0% < 90.0%"},
		{"no samples", func(r *StepResult) { r.Checks[0].Samples = 0 }, VerdictFail, "no samples"},
		{"stopped", func(r *StepResult) { r.Stopped = "x" }, VerdictFail, "stopped early: x"},
		{"nothing succeeded", func(r *StepResult) { r.Completed = 0 }, VerdictFail, "no request succeeded"},
		{"dispatch lag", func(r *StepResult) { r.DispatchLagP99Ms = 5.5 }, VerdictDistorted, ""},
		{"cpu", func(r *StepResult) { r.ClientCPU = 0.9 }, VerdictDistorted, ""},
		{"interrupted", func(r *StepResult) { r.Interrupted = true }, VerdictInterrupted, ""},
	} {
		r := base()
		tc.mod(&r)
		c.Judge(&r)
		if r.Verdict != tc.verdict || r.Pass != (tc.verdict == VerdictPass) {
			t.Errorf("%s: verdict %q pass %v, want %q", tc.name, r.Verdict, r.Pass, tc.verdict)
		}
		if tc.reason != "" && !strings.Contains(strings.Join(r.Reasons, "; "), tc.reason) {
			t.Errorf("%s: reasons %q, want %q", tc.name, r.Reasons, tc.reason)
		}
	}
}

func TestParsers(t *testing.T) {
	slo, err := ParseSLO("ttft:p99:500ms tpot:p90:50,e2el:p99.9:2s")
	if err != nil || len(slo) != 3 || slo[0] != (Objective{MetricTTFT, 99, 500 * time.Millisecond}) ||
		slo[1] != (Objective{MetricTPOT, 90, 50 * time.Millisecond}) || slo[2] != (Objective{MetricE2EL, 99.9, 2 * time.Second}) {
		t.Fatalf("ParseSLO: %v %v", slo, err)
	}
	for _, bad := range []string{"", "ttft:500ms", "foo:p99:1s", "ttft:99:1s", "ttft:p0:1s", "ttft:p99:-1s", "ttft:p99:1s ttft:p90:2s"} {
		if _, err := ParseSLO(bad); err == nil {
			t.Errorf("ParseSLO(%q) accepted", bad)
		}
	}
	l, search, _, _, err := ParseValues(AxisSpeed, "4,0.5,1x,2,1")
	if err != nil || search || len(l) != 4 || l[0] != 0.5 || l[3] != 4 {
		t.Errorf("ladder %v %v %v", l, search, err)
	}
	if _, s, lo, hi, err := ParseValues(AxisSpeed, "search:0.25-16"); err != nil || !s || lo != 0.25 || hi != 16 {
		t.Errorf("search range %v %g %g %v", s, lo, hi, err)
	}
	for _, bad := range []string{"", "fast", "0,1", "-1", "search:4-2", "searchx"} {
		if _, _, _, _, err := ParseValues(AxisSpeed, bad); err == nil {
			t.Errorf("ParseValues(%q) accepted", bad)
		}
	}
	if _, _, _, _, err := ParseValues(AxisConcurrency, "1.5"); err == nil {
		t.Error("a fractional concurrency was accepted")
	}
	if a, lo, hi, err := ParseSearch("rate:2-64"); err != nil || a != AxisRate || lo != 2 || hi != 64 {
		t.Errorf("ParseSearch: %v %g %g %v", a, lo, hi, err)
	}
	for in, want := range map[string]float64{"5%": 0.05, "0.1": 0.1, "2.5%": 0.025} {
		if v, err := ParseResolution(in); err != nil || math.Abs(v-want) > 1e-12 {
			t.Errorf("ParseResolution(%q) = %g, %v", in, v, err)
		}
	}
	if _, err := ParseResolution("150%"); err == nil {
		t.Error("resolution 150% accepted")
	}
}

// certainFailCount is exact: with that many of n samples just above the
// threshold (0 here) and the rest far below, the percentile is above it;
// with one fewer it is not.
func TestCertainFailCount(t *testing.T) {
	for _, n := range []int{1, 2, 7, 60, 101} {
		for _, p := range []float64{50, 90, 99, 99.9, 100} {
			worst := func(over int) float64 {
				xs := make([]float64, n)
				for i := range xs {
					xs[i] = -1e6
					if i >= n-over {
						xs[i] = 1e-9
					}
				}
				return percentileOf(xs, p)
			}
			k := certainFailCount(n, p)
			if k > n || worst(k) <= 0 {
				t.Errorf("n %d p %g: %d samples above do not force the percentile above (got %g)", n, p, k, worst(k))
			}
			if worst(k-1) > 0 {
				t.Errorf("n %d p %g: %d samples above already force it: %d is not the least", n, p, k-1, k)
			}
		}
	}
}

// percentileOf is numpy's linear percentile of sorted xs.
func percentileOf(xs []float64, p float64) float64 {
	h := float64(len(xs)-1) * p / 100
	lo := int(math.Floor(h))
	if lo >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[lo] + (h-float64(lo))*(xs[lo+1]-xs[lo])
}
