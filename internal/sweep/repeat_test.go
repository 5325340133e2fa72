package sweep

import (
	"context"
	"math"
	"testing"
	"time"
)

// A repeated step against a fake whose runs differ, judged as the sweep
// judges it: counts add up, rates and latencies are the means (an
// objective is judged on the mean of the runs' percentiles), the client
// health is the worst run's, and a run stopped early ends the step there.
func TestRepeatStepperCombines(t *testing.T) {
	runs := []StepResult{
		{Requests: 10, Completed: 10, Errors: 0, Good: 10, Throughput: 10, OutputThroughput: 100, TTFT: Dist{P99: 100},
			Checks: []Check{{Metric: "ttft", P: 99, ThresholdMs: 200, ValueMs: 100, Samples: 10, Met: true}}, Pass: true, Verdict: "pass"},
		{Requests: 10, Completed: 9, Errors: 1, Good: 8, Throughput: 12, OutputThroughput: 120, TTFT: Dist{P99: 300},
			Checks: []Check{{Metric: "ttft", P: 99, ThresholdMs: 200, ValueMs: 300, Samples: 10, Met: false}}, Pass: false, Verdict: "fail",
			Reasons: []string{"ttft p99 300 ms > 200 ms"}},
		{Requests: 10, Completed: 10, Good: 10, Throughput: 14, OutputThroughput: 140, TTFT: Dist{P99: 110}, DispatchLagP99Ms: 5,
			Checks: []Check{{Metric: "ttft", P: 99, ThresholdMs: 200, ValueMs: 110, Samples: 10, Met: true}}, Pass: true, Verdict: "pass"},
	}
	var got []int
	inner := StepFunc(func(_ context.Context, spec StepSpec) (StepResult, error) {
		got = append(got, spec.Run)
		return runs[spec.Run-1], nil
	})
	rs := &RepeatStepper{Inner: inner, Runs: 3, Confidence: 0.95}
	res, err := rs.Step(context.Background(), StepSpec{Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("runs asked for: %v", got)
	}
	crit := Criteria{MaxErrorRate: 0.05, MaxClientLag: 2 * time.Millisecond, MaxClientCPU: 1}
	crit.Judge(&res)
	if res.Requests != 30 || res.Errors != 1 || res.Good != 28 || math.Abs(res.ErrorRate-1.0/30) > 1e-12 || math.Abs(res.GoodFraction-28.0/30) > 1e-12 {
		t.Errorf("counts: %+v", res)
	}
	if res.Throughput != 12 || res.OutputThroughput != 120 || res.TTFT.P99 != 170 {
		t.Errorf("means: throughput %g output %g ttft p99 %g", res.Throughput, res.OutputThroughput, res.TTFT.P99)
	}
	if c := res.Checks[0]; c.ValueMs != 170 || c.Samples != 30 || !c.Met {
		t.Errorf("check %+v: want the mean value over every sample, met (170 <= 200) though run 2 missed it", c)
	}
	// Run 3's dispatch lag (5 ms > 2 ms) marks the step, though the mean
	// (1.67 ms) is within the limit.
	if !res.Distorted || res.DispatchLagP99Ms != 5 || res.Verdict != VerdictDistorted {
		t.Errorf("health: distorted %v, lag %g, verdict %q: want the worst run's", res.Distorted, res.DispatchLagP99Ms, res.Verdict)
	}
	// t(0.975, 2) = 4.302653, sd of 10, 12, 14 = 2.
	half := 4.302653 * 2 / math.Sqrt(3)
	if r := res.Repeat; r == nil || r.Runs != 3 || math.Abs(r.Throughput.CILow-(12-half)) > 1e-5 || math.Abs(r.Throughput.CIHigh-(12+half)) > 1e-5 {
		t.Errorf("interval: %+v", res.Repeat)
	}

	runs[1].Stopped = "ttft p99 certain to fail"
	got = nil
	res, err = rs.Step(context.Background(), StepSpec{Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || res.Repeat.Runs != 2 || res.Stopped != "run 2: ttft p99 certain to fail" {
		t.Errorf("after a run stopped early: runs %v, repeat %+v, stopped %q", got, res.Repeat, res.Stopped)
	}
}
