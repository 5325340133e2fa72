package analyze

import (
	"math"
	"testing"
)

// Two-sided critical values of Student's t as published in standard
// tables (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2).
func TestTQuantileTable(t *testing.T) {
	for _, c := range []struct {
		p, df, want float64
	}{
		{0.975, 1, 12.706},
		{0.975, 2, 4.303},
		{0.975, 3, 3.182},
		{0.975, 4, 2.776},
		{0.975, 9, 2.262},
		{0.975, 29, 2.045},
		{0.975, 100, 1.984},
		{0.95, 5, 2.015},
		{0.995, 2, 9.925},
		{0.995, 10, 3.169},
		{0.9995, 1, 636.619},
		{0.90, 1, 3.078},
		{0.025, 3, -3.182},
	} {
		if got := TQuantile(c.p, c.df); math.Abs(got-c.want) > 0.0006*math.Max(1, math.Abs(c.want)/10) {
			t.Errorf("t(%g, df %g) = %.5f, want %.3f", c.p, c.df, got, c.want)
		}
	}
	// Many degrees of freedom: the normal quantile.
	if got := TQuantile(0.975, 1e7); math.Abs(got-1.959964) > 1e-5 {
		t.Errorf("t(0.975, df 1e7) = %.6f, want the normal's 1.959964", got)
	}
}

func TestRunStatFill(t *testing.T) {
	st := RunStat{Values: []float64{10, 12, 14}}
	st.fill(TQuantile(0.975, 2))
	// mean 12, sample sd 2, half width 4.303*2/sqrt(3).
	if st.Mean != 12 || math.Abs(st.StdDev-2) > 1e-12 || math.Abs(st.HalfWidth-4.302653*2/math.Sqrt(3)) > 1e-5 ||
		st.CILow != st.Mean-st.HalfWidth || math.Abs(st.CV-2.0/12) > 1e-12 || st.Min != 10 || st.Max != 14 {
		t.Errorf("%+v", st)
	}
	one := RunStat{Values: []float64{5}}
	one.fill(0)
	if one.StdDev != 0 || one.CILow != 5 || one.CIHigh != 5 {
		t.Errorf("one run: %+v", one)
	}
}

func TestRunPath(t *testing.T) {
	for in, want := range map[string]string{"run.parquet": "run-1.parquet", "d/x": "d/x-1", "a.b/c.parquet": "a.b/c-1.parquet"} {
		if got := RunPath(in, 1); got != want {
			t.Errorf("RunPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// --beyond-ci: a change past the threshold fails only when the intervals
// are disjoint in its direction.
func TestGateRunsBeyondCI(t *testing.T) {
	set := func(vals ...float64) *RunSet {
		st := RunStat{Metric: "ttft.p99", Values: vals}
		tc := TQuantile(0.975, float64(len(vals)-1))
		st.fill(tc)
		return &RunSet{Runs: make([]string, len(vals)), Confidence: 0.95, TCritical: tc, Metrics: []RunStat{st}}
	}
	base := set(100, 101, 99)
	noisy := set(100, 140, 130) // mean +23%, interval reaches below A's
	clear := set(120, 121, 119) // mean +20%, interval above A's
	conds, err := ParseGate([]string{"ttft.p99>+10%"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		b                   *RunSet
		beyond, fail, noise bool
	}{
		{noisy, false, true, false},
		{noisy, true, false, true},
		{clear, true, true, false},
		{base, true, false, false},
	} {
		rs, err := EvaluateGateRuns(conds, base, c.b, c.beyond)
		if err != nil {
			t.Fatal(err)
		}
		if r := rs[0]; r.Failed != c.fail || r.WithinNoise != c.noise || r.A != 100 {
			t.Errorf("B %v beyond-ci %v: %+v, want failed %v within noise %v", c.b.Metrics[0].Values, c.beyond, r, c.fail, c.noise)
		}
	}
	if _, err := EvaluateGateRuns([]GateCondition{{Metric: "ttft.p50"}}, base, base, false); err == nil {
		t.Error("a metric the sets lack and cannot compute: no error")
	}
}
