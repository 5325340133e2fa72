package analyze

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

// The gate's arithmetic on hand-set figures: relative changes in percent
// of A, absolute ones in the metric's unit, A = 0 as an infinite change.
func TestGateHandComputed(t *testing.T) {
	a := &Summary{Options: Options{Percentiles: []float64{50, 99}}, OutputThroughput: 200, Failed: 0,
		TTFT: Stats{Mean: 100, Percentiles: []Pct{{50, 90}, {99, 300}}}}
	b := &Summary{Options: a.Options, OutputThroughput: 188, Failed: 2,
		TTFT: Stats{Mean: 105, Percentiles: []Pct{{50, 90}, {99, 333}}}}
	a.Figures.PrefillThroughputPerUser = Values{Median: 1000}
	b.Figures.PrefillThroughputPerUser = Values{Median: 940}
	conds, err := ParseGate([]string{"ttft.p99>+10%, ttft.mean>+5%", "output_throughput<-5%", "failed>0",
		"prefill_throughput_per_user.median<-50", "ttft.p50 > 0"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := EvaluateGate(conds, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		change float64
		failed bool
	}{
		{11, true},  // 300 -> 333: +11% > +10%
		{5, false},  // 100 -> 105: +5%, not above +5%
		{-6, true},  // 200 -> 188: -6% < -5%
		{2, true},   // 0 -> 2 failed requests: +2 > 0
		{-60, true}, // 1000 -> 940 tok/s: -60 < -50
		{0, false},  // unchanged
	}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d", len(rs), len(want))
	}
	for i, w := range want {
		if math.Abs(rs[i].Change-w.change) > 1e-9 || rs[i].Failed != w.failed {
			t.Errorf("%s: change %g failed %v, want %g %v", rs[i].Text, rs[i].Change, rs[i].Failed, w.change, w.failed)
		}
	}
	if !GateFailed(rs) || GateFailed(rs[1:2]) {
		t.Error("GateFailed")
	}
	// From zero, a relative change is infinite.
	c, _ := ParseGate([]string{"failed>+100%"})
	rs, _ = EvaluateGate(c, a, b)
	if !math.IsInf(rs[0].Change, 1) || !rs[0].Failed {
		t.Errorf("0 -> 2 failed: %+v", rs[0])
	}
	// JSON cannot carry infinity: the verdict leaves the number out and
	// keeps the text.
	v := Verdict(rs, "a.parquet", "b.parquet")
	if v.Passed || v.Conditions[0].Change != nil || v.Conditions[0].ChangeText != "+inf%" {
		t.Errorf("verdict %+v", v)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Error(err)
	}
	// A percentile not computed.
	c, _ = ParseGate([]string{"ttft.p90>+1%"})
	if _, err := EvaluateGate(c, a, b); !errors.Is(err, ErrBadInput) {
		t.Errorf("p90 not computed: %v", err)
	}
	for _, bad := range []string{"ttft", "ttft>1", "ttft.p99>", "ttft.p99=1", "x.p99>1", "ttft.q99>1", "ttft.p99>1%%"} {
		if _, err := ParseGate([]string{bad}); !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: %v, want a bad-input error", bad, err)
		}
	}
}
