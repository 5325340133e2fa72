package analyze

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A gate fails a comparison in CI: `compare A B --fail-on
// 'ttft.p99>+10%,output_throughput<-5%'` exits 1 when B moved past a
// threshold from A. Each condition is METRIC OP CHANGE: OP is > (fail when
// the change is above) or < (below); CHANGE is a signed number, relative
// to A when it ends in % ((B - A) / |A|), else absolute (B - A, in the
// metric's unit). On two recordings it is a threshold on the change, not
// a test of significance, so set it above the run-to-run noise of the
// setup; on run sets (runs.go) it compares the means across runs and, with
// --beyond-ci, also requires the change to clear the confidence intervals.

// GateCondition is one parsed condition.
type GateCondition struct {
	Text      string  `json:"condition"`
	Metric    string  `json:"metric"`
	Above     bool    `json:"above"` // '>': fail when the change is above Threshold; '<': below
	Threshold float64 `json:"threshold"`
	Relative  bool    `json:"relative"` // Threshold is in percent of A
}

// GateResult is one condition evaluated on two runs. Change is in percent
// of A when the condition is relative (±Inf when A is 0 and B is not),
// else B - A.
type GateResult struct {
	GateCondition
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	Change float64 `json:"change"`
	Failed bool    `json:"failed"`
	// WithinNoise says the change passed the threshold but not the run
	// sets' confidence intervals (compare --beyond-ci), so it did not fail.
	WithinNoise bool `json:"within_noise,omitempty"`
}

// gateStats are the distributions a gate can name, in ms.
var gateStats = map[string]func(*Summary) Stats{
	"ttft": func(s *Summary) Stats { return s.TTFT },
	"tpot": func(s *Summary) Stats { return s.TPOT },
	"itl":  func(s *Summary) Stats { return s.ITL },
	"e2el": func(s *Summary) Stats { return s.E2EL },
	"ttfo": func(s *Summary) Stats { return s.Figures.TimeToFirstOutputToken },
	"ttst": func(s *Summary) Stats { return s.Figures.TimeToSecondToken },

	"decode_itl":         func(s *Summary) Stats { return s.Figures.DecodeITL },
	"reasoning_duration": func(s *Summary) Stats { return s.Figures.ReasoningDuration },
}

// gateValues are the per-request figures in their own units.
var gateValues = map[string]func(*Summary) Values{
	"output_token_throughput_per_user": func(s *Summary) Values { return s.Figures.OutputTokenThroughputPerUser },
	"prefill_throughput_per_user":      func(s *Summary) Values { return s.Figures.PrefillThroughputPerUser },
}

// gateScalars are the run's single figures.
var gateScalars = map[string]func(*Summary) float64{
	"request_throughput":     func(s *Summary) float64 { return s.RequestThroughput },
	"request_goodput":        func(s *Summary) float64 { return s.RequestGoodput },
	"output_throughput":      func(s *Summary) float64 { return s.OutputThroughput },
	"total_token_throughput": func(s *Summary) float64 { return s.TotalTokenThroughput },
	"completed":              func(s *Summary) float64 { return float64(s.Completed) },
	"failed":                 func(s *Summary) float64 { return float64(s.Failed) },
	"cache_hit_rate":         func(s *Summary) float64 { return 100 * s.Cache.HitRatio }, // percent
}

// GateMetrics lists the names a condition may use, for messages and docs.
func GateMetrics() []string {
	var out []string
	for k := range gateStats {
		out = append(out, k+".{mean,median,min,max,pN}")
	}
	for k := range gateValues {
		out = append(out, k+".{mean,median,min,max,pN}")
	}
	for k := range gateScalars {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ParseGate parses the conditions of --fail-on (each list element may
// hold several, comma-separated). A bad one is an error wrapping
// ErrBadInput that names it and says what was expected.
func ParseGate(exprs []string) ([]GateCondition, error) {
	var out []GateCondition
	for _, e := range exprs {
		for _, text := range strings.Split(e, ",") {
			text = strings.TrimSpace(text)
			if text == "" {
				continue
			}
			c, err := parseCondition(text)
			if err != nil {
				return nil, fmt.Errorf("--fail-on %q: %w", text, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func parseCondition(text string) (GateCondition, error) {
	i := strings.IndexAny(text, "<>")
	if i <= 0 {
		return GateCondition{}, fmt.Errorf("expected METRIC>CHANGE or METRIC<CHANGE, e.g. ttft.p99>+10%%: %w", ErrBadInput)
	}
	c := GateCondition{Text: text, Metric: strings.TrimSpace(text[:i]), Above: text[i] == '>'}
	if err := checkGateMetric(c.Metric); err != nil {
		return GateCondition{}, err
	}
	num := strings.TrimSpace(text[i+1:])
	if c.Relative = strings.HasSuffix(num, "%"); c.Relative {
		num = strings.TrimSpace(strings.TrimSuffix(num, "%"))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return GateCondition{}, fmt.Errorf("change %q: expected a number, e.g. +10%% or -5 (a %% sign makes it relative to A): %w", num, ErrBadInput)
	}
	c.Threshold = v
	return c, nil
}

// checkGateMetric says whether name is a gate metric (its percentile is
// checked against the runs' --percentiles when evaluated).
func checkGateMetric(name string) error {
	if _, ok := gateScalars[name]; ok {
		return nil
	}
	base, stat, ok := strings.Cut(name, ".")
	_, isStats := gateStats[base]
	_, isValues := gateValues[base]
	if !ok || !(isStats || isValues) {
		return fmt.Errorf("unknown metric %q: expected one of %s: %w", name, strings.Join(GateMetrics(), ", "), ErrBadInput)
	}
	switch stat {
	case "mean", "median", "min", "max":
		return nil
	}
	if p, err := strconv.ParseFloat(strings.TrimPrefix(stat, "p"), 64); !strings.HasPrefix(stat, "p") || err != nil || p < 0 || p > 100 {
		return fmt.Errorf("metric %q: expected mean, median, min, max or pN (a percentile of --percentiles) after %q: %w", name, base+".", ErrBadInput)
	}
	return nil
}

// gateValue reads metric from s.
func gateValue(s *Summary, metric string) (float64, error) {
	if f, ok := gateScalars[metric]; ok {
		return f(s), nil
	}
	base, stat, _ := strings.Cut(metric, ".")
	var st Stats
	if f, ok := gateStats[base]; ok {
		st = f(s)
	} else {
		v := gateValues[base](s)
		st = Stats{Count: v.Count, Mean: v.Mean, Median: v.Median, Min: v.Min, Max: v.Max}
		for _, p := range v.Percentiles {
			st.Percentiles = append(st.Percentiles, Pct{P: p.P, Value: p.Value})
		}
	}
	switch stat {
	case "mean":
		return st.Mean, nil
	case "median":
		return st.Median, nil
	case "min":
		return st.Min, nil
	case "max":
		return st.Max, nil
	}
	p, _ := strconv.ParseFloat(strings.TrimPrefix(stat, "p"), 64)
	for _, x := range st.Percentiles {
		if x.P == p {
			return x.Value, nil
		}
	}
	var have []string
	for _, x := range s.Options.Percentiles {
		have = append(have, pWord(x))
	}
	return 0, fmt.Errorf("--fail-on %s: percentile %s is not computed (--percentiles %s): %w", metric, pWord(p), strings.Join(have, ","), ErrBadInput)
}

// EvaluateGate evaluates the conditions on base a and new b. An error
// (wrapping ErrBadInput) says a condition names a percentile the runs did
// not compute.
func EvaluateGate(conds []GateCondition, a, b *Summary) ([]GateResult, error) {
	var out []GateResult
	for _, c := range conds {
		x, err := gateValue(a, c.Metric)
		if err != nil {
			return nil, err
		}
		y, err := gateValue(b, c.Metric)
		if err != nil {
			return nil, err
		}
		out = append(out, judge(c, x, y))
	}
	return out, nil
}

// judge evaluates condition c on the values x of A and y of B.
func judge(c GateCondition, x, y float64) GateResult {
	r := GateResult{GateCondition: c, A: x, B: y, Change: y - x}
	if c.Relative {
		switch {
		case x != 0:
			r.Change = 100 * (y - x) / math.Abs(x)
		case y > x:
			r.Change = math.Inf(1)
		case y < x:
			r.Change = math.Inf(-1)
		}
	}
	if c.Above {
		r.Failed = r.Change > c.Threshold
	} else {
		r.Failed = r.Change < c.Threshold
	}
	return r
}

// GateFailed reports whether any result failed.
func GateFailed(rs []GateResult) bool {
	return slices.ContainsFunc(rs, func(r GateResult) bool { return r.Failed })
}

// WriteGate prints one line per condition: A, B, the change and whether
// it failed.
func WriteGate(w io.Writer, rs []GateResult) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, center(" Gate (--fail-on) ", '=', 98))
	fmt.Fprintf(bw, "%-40s %14s %14s %14s %10s\n", "condition", "A", "B", "change", "verdict")
	for _, r := range rs {
		change := r.changeText()
		verdict := "pass"
		switch {
		case r.Failed:
			verdict = "FAIL"
		case r.WithinNoise:
			verdict = "pass:noise"
		}
		fmt.Fprintf(bw, "%-40s %14.2f %14.2f %14s %10s\n", r.Text, r.A, r.B, change, verdict)
	}
	return bw.Flush()
}

// GateVerdict is the machine-readable outcome of a gate (compare
// --verdict): Passed is false when any condition held.
type GateVerdict struct {
	Passed     bool          `json:"passed"`
	Base       string        `json:"base"`
	New        string        `json:"new"`
	Conditions []GateOutcome `json:"conditions"`
}

// GateOutcome is a GateResult as JSON can carry it: Change is null when
// infinite (a relative change from 0), and ChangeText always holds it as
// printed ("+12.00%", "+inf%").
type GateOutcome struct {
	GateCondition
	A          float64  `json:"a"`
	B          float64  `json:"b"`
	Change     *float64 `json:"change"`
	ChangeText string   `json:"change_text"`
	Failed     bool     `json:"failed"`
	// WithinNoise: past the threshold, but inside the run sets' noise.
	WithinNoise bool `json:"within_noise,omitempty"`
}

// Verdict builds the verdict of results for runs base and new.
func Verdict(rs []GateResult, base, new string) GateVerdict {
	v := GateVerdict{Passed: !GateFailed(rs), Base: base, New: new, Conditions: []GateOutcome{}}
	for _, r := range rs {
		v.Conditions = append(v.Conditions, GateOutcome{GateCondition: r.GateCondition, A: r.A, B: r.B,
			Change: finite(r.Change), ChangeText: r.changeText(), Failed: r.Failed, WithinNoise: r.WithinNoise})
	}
	return v
}

// changeText formats the change as the gate's lines print it.
func (r GateResult) changeText() string {
	change := strconv.FormatFloat(r.Change, 'f', 2, 64)
	switch {
	case math.IsInf(r.Change, 1):
		change = "+inf"
	case math.IsInf(r.Change, -1):
		change = "-inf"
	case r.Change >= 0:
		change = "+" + change
	}
	if r.Relative {
		change += "%"
	}
	return change
}
