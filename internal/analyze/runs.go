package analyze

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A run set is N complete runs of one trace (replay --num-runs N writes
// OUT-1..OUT-N). Its aggregate follows AIPerf's multi-run confidence
// report: per metric of each run's summary, the mean across runs, the
// sample standard deviation (N-1 in the denominator), the coefficient of
// variation and the confidence interval of the mean, mean ± t(1-α/2,
// N-1)·sd/√N with Student's t. Each run counts once, whatever its number
// of requests: the interval is about run-to-run noise, not about the
// requests within a run.

// DefaultConfidence is the confidence level of a run set's intervals.
const DefaultConfidence = 0.95

// RunStat is one metric across the runs of a set.
type RunStat struct {
	// Metric is the gate's name for it (ttft.p99, output_throughput).
	Metric string    `json:"metric"`
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
	Mean   float64   `json:"mean"`
	// StdDev is the sample standard deviation (N-1); CV is StdDev/|Mean|
	// (0 when Mean is 0).
	StdDev float64 `json:"std"`
	CV     float64 `json:"cv"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// CILow and CIHigh bound the mean at the set's confidence level;
	// HalfWidth is t·sd/√N.
	CILow     float64 `json:"ci_low"`
	CIHigh    float64 `json:"ci_high"`
	HalfWidth float64 `json:"ci_half_width"`
}

// RunSet is the aggregate of a set of runs.
type RunSet struct {
	Runs       []string  `json:"runs"`
	Confidence float64   `json:"confidence"`
	TCritical  float64   `json:"t_critical"` // t(1-α/2, N-1)
	Metrics    []RunStat `json:"metrics"`
	Note       string    `json:"note,omitempty"`

	sums []*Summary // the runs, for gate metrics beyond Metrics
}

// RunPath is the recording of run i (from 1) of a set written to out:
// run.parquet gives run-1.parquet.
func RunPath(out string, i int) string {
	ext := filepath.Ext(out)
	return strings.TrimSuffix(out, ext) + "-" + strconv.Itoa(i) + ext
}

// FindRunSet returns the recordings of the set written to out (OUT-1,
// OUT-2, ... while they exist) when out itself does not exist and OUT-1
// does; else nil.
func FindRunSet(out string) []string {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	var paths []string
	for i := 1; ; i++ {
		p := RunPath(out, i)
		if _, err := os.Stat(p); err != nil {
			return paths
		}
		paths = append(paths, p)
	}
}

// runMetrics are the metrics a set aggregates, named as the gate names
// them: the run's throughputs and counts, and the mean, median and each
// computed percentile of TTFT, TPOT, ITL and E2EL.
func runMetrics(s *Summary) []struct{ key, name string } {
	type m = struct{ key, name string }
	out := []m{
		{"completed", "Successful requests"},
		{"failed", "Failed requests"},
		{"request_throughput", "Request throughput (req/s)"},
	}
	if !s.Options.Goodput.IsZero() {
		out = append(out, m{"request_goodput", "Request goodput (req/s)"})
	}
	out = append(out, m{"output_throughput", "Output token throughput (tok/s)"},
		m{"total_token_throughput", "Total token throughput (tok/s)"})
	for _, mi := range metricInfo {
		st := s.metric(mi.key)
		out = append(out, m{mi.key + ".mean", "Mean " + mi.name + " (ms)"}, m{mi.key + ".median", "Median " + mi.name + " (ms)"})
		for _, p := range st.Percentiles {
			out = append(out, m{mi.key + ".p" + pWord(p.P), "P" + pWord(p.P) + " " + mi.name + " (ms)"})
		}
	}
	return out
}

// AggregateRuns aggregates the summaries of a set's runs (named by names,
// analyzed with the same Options) at confidence level conf (0 < conf < 1).
// A set of one run has no spread: its interval is the point itself and the
// note says so.
func AggregateRuns(names []string, sums []*Summary, conf float64) (*RunSet, error) {
	if len(sums) == 0 || len(names) != len(sums) {
		return nil, fmt.Errorf("a run set needs at least one run: %w", ErrBadInput)
	}
	if !(conf > 0 && conf < 1) {
		return nil, fmt.Errorf("confidence %g: expected a level between 0 and 1, e.g. 0.95: %w", conf, ErrBadInput)
	}
	n := len(sums)
	rs := &RunSet{Runs: names, Confidence: conf, sums: sums}
	if n > 1 {
		rs.TCritical = TQuantile(1-(1-conf)/2, float64(n-1))
	}
	switch {
	case n == 1:
		rs.Note = "one run: no spread and no interval; run at least 3 to estimate the noise"
	case n < 3:
		rs.Note = "2 runs: the interval rests on 1 degree of freedom and is very wide; run at least 3"
	}
	for _, m := range runMetrics(sums[0]) {
		st := RunStat{Metric: m.key, Name: m.name}
		for i, s := range sums {
			v, err := gateValue(s, m.key)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
			st.Values = append(st.Values, v)
		}
		st.fill(rs.TCritical)
		rs.Metrics = append(rs.Metrics, st)
	}
	return rs, nil
}

// fill computes the statistics of st.Values with critical value t.
func (st *RunStat) fill(t float64) {
	n := float64(len(st.Values))
	st.Min, st.Max = math.Inf(1), math.Inf(-1)
	sum := 0.0
	for _, v := range st.Values {
		sum += v
		st.Min, st.Max = min(st.Min, v), max(st.Max, v)
	}
	st.Mean = sum / n
	if len(st.Values) > 1 {
		ss := 0.0
		for _, v := range st.Values {
			ss += (v - st.Mean) * (v - st.Mean)
		}
		st.StdDev = math.Sqrt(ss / (n - 1))
		st.HalfWidth = t * st.StdDev / math.Sqrt(n)
	}
	if st.Mean != 0 {
		st.CV = st.StdDev / math.Abs(st.Mean)
	}
	st.CILow, st.CIHigh = st.Mean-st.HalfWidth, st.Mean+st.HalfWidth
}

// stat returns the set's statistics of a gate metric, computing them from
// the runs when Metrics does not hold it.
func (rs *RunSet) stat(metric string) (RunStat, error) {
	for _, m := range rs.Metrics {
		if m.Metric == metric {
			return m, nil
		}
	}
	st := RunStat{Metric: metric, Name: metric}
	for i, s := range rs.sums {
		v, err := gateValue(s, metric)
		if err != nil {
			return st, fmt.Errorf("%s: %w", rs.Runs[i], err)
		}
		st.Values = append(st.Values, v)
	}
	if len(st.Values) == 0 {
		return st, fmt.Errorf("metric %s is not in the run set: %w", metric, ErrBadInput)
	}
	st.fill(rs.TCritical)
	return st, nil
}

// WriteText prints one line per metric: mean, sd, CV and the interval.
func (rs *RunSet) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, center(fmt.Sprintf(" Run set: %d runs ", len(rs.Runs)), '=', 110))
	for i, r := range rs.Runs {
		fmt.Fprintf(bw, "run %d: %s\n", i+1, r)
	}
	ci := fmt.Sprintf("%s%% CI of mean", pWord(100*rs.Confidence))
	fmt.Fprintf(bw, "%-34s %14s %12s %8s %37s\n", "metric", "mean", "std", "CV", ci)
	for _, m := range rs.Metrics {
		fmt.Fprintf(bw, "%-34s %14.2f %12.2f %7.2f%% [%16.2f, %16.2f]\n", m.Name, m.Mean, m.StdDev, 100*m.CV, m.CILow, m.CIHigh)
	}
	if rs.TCritical > 0 {
		fmt.Fprintf(bw, "Student's t with %s: t = %.4f; std is the sample std (N-1)\n", plural(len(rs.Runs)-1, "degree of freedom", "degrees of freedom"), rs.TCritical)
	}
	if rs.Note != "" {
		fmt.Fprintln(bw, "NOTE:", rs.Note)
	}
	fmt.Fprintln(bw, strings.Repeat("=", 110))
	return bw.Flush()
}

// WriteJSON writes the set as one indented JSON object.
func (rs *RunSet) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}

// TQuantile is the p quantile of Student's t distribution with df degrees
// of freedom (0 < p < 1, df > 0): the inverse of its CDF, found by
// bisection to full float64 precision.
func TQuantile(p, df float64) float64 {
	if p == 0.5 {
		return 0
	}
	if p < 0.5 {
		return -TQuantile(1-p, df)
	}
	lo, hi := 0.0, 1.0
	for tCDF(hi, df) < p {
		hi *= 2
	}
	for range 200 {
		mid := (lo + hi) / 2
		if mid == lo || mid == hi {
			break
		}
		if tCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// tCDF is Student's t CDF at t ≥ 0: 1 - I_x(df/2, 1/2)/2 with
// x = df/(df+t²).
func tCDF(t, df float64) float64 {
	return 1 - 0.5*regIncBeta(df/(df+t*t), df/2, 0.5)
}

// regIncBeta is the regularized incomplete beta function I_x(a, b), by its
// continued fraction (modified Lentz), using the symmetry
// I_x(a,b) = 1 - I_{1-x}(b,a) where the fraction converges slowly.
func regIncBeta(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	if x > (a+1)/(a+b+2) {
		return 1 - regIncBeta(1-x, b, a)
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab-la-lb+a*math.Log(x)+b*math.Log(1-x)) / a
	const tiny = 1e-300
	f, c, d := 1.0, 1.0, 0.0
	for i := 0; i <= 400; i++ {
		m := float64(i / 2)
		var num float64
		switch {
		case i == 0:
			num = 1
		case i%2 == 0:
			num = m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		default:
			num = -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		}
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		d = 1 / d
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		cd := c * d
		f *= cd
		if math.Abs(1-cd) < 1e-15 {
			break
		}
	}
	return front * (f - 1)
}

// plural is "n one" or "n many".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
