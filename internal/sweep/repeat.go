package sweep

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
)

// RepeatStepper runs every step Runs times (sweep --repeat), Cooldown
// apart, and makes the step's result of the runs, which the sweep then
// judges (Criteria.Judge) like any step: the curve and the search read
// the means across runs. Counts are summed (so the error rate and the
// goodput are over every run's requests), rates and latency statistics
// (the SLO objectives' percentiles among them) are the means of the
// runs', and the client health figures are the worst run's, so one run
// the client distorted marks the step distorted. A run stopped early or
// interrupted ends the step with the runs so far. With Dir set (the inner stepper a ReplayStepper
// writing there), the runs' recordings STEP-1.parquet ... are analyzed
// together as a run set (analyze --runs): StepRuns.Set, and the set's
// HTML report STEP.html.
type RepeatStepper struct {
	Inner      Stepper
	Runs       int
	Cooldown   time.Duration
	Confidence float64
	Dir        string
	Options    analyze.Options // the runs' analysis
}

var _ Stepper = (*RepeatStepper)(nil)

// StepRuns are a repeated step's figures across its runs: the steady
// throughput and the output token throughput of each run with the
// confidence interval of their mean (Student's t, runs - 1 degrees of
// freedom), and with the recordings the run set's every metric.
type StepRuns struct {
	Runs       int     `json:"runs"`       // runs made (fewer than --repeat when one stopped early)
	Confidence float64 `json:"confidence"` // confidence level of the intervals (--confidence)
	// Throughput is the steady throughput (requests/s) of each run;
	// OutputThroughput the output tokens per second.
	Throughput       RunInterval `json:"throughput"`
	OutputThroughput RunInterval `json:"output_throughput"`
	// Set is the runs' recordings analyzed as a run set (analyze --runs):
	// every metric's mean and interval; absent with a single run.
	Set *analyze.RunSet `json:"set,omitempty"`
}

// RunInterval is one figure over the runs: each run's value, their mean,
// sample standard deviation and the confidence interval of the mean (the
// mean itself on both ends with one run).
type RunInterval struct {
	Values []float64 `json:"values"` // each run's, in run order
	Mean   float64   `json:"mean"`   // mean of values
	Std    float64   `json:"std"`    // sample standard deviation (N-1)
	// CILow and CIHigh bound the mean: mean ± t(1-α/2, N-1)·std/√N.
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
}

// interval is the RunInterval of vs at confidence conf.
func interval(vs []float64, conf float64) RunInterval {
	n := float64(len(vs))
	r := RunInterval{Values: vs}
	for _, v := range vs {
		r.Mean += v / n
	}
	r.CILow, r.CIHigh = r.Mean, r.Mean
	if len(vs) < 2 {
		return r
	}
	for _, v := range vs {
		r.Std += (v - r.Mean) * (v - r.Mean)
	}
	r.Std = math.Sqrt(r.Std / (n - 1))
	half := analyze.TQuantile(1-(1-conf)/2, n-1) * r.Std / math.Sqrt(n)
	r.CILow, r.CIHigh = r.Mean-half, r.Mean+half
	return r
}

// Step runs spec's load Runs times and combines the runs.
func (r *RepeatStepper) Step(ctx context.Context, spec StepSpec) (StepResult, error) {
	var runs []StepResult
	for i := 1; i <= r.Runs && ctx.Err() == nil; i++ {
		if i > 1 && r.Cooldown > 0 {
			t := time.NewTimer(r.Cooldown)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			if ctx.Err() != nil {
				break
			}
		}
		one := spec
		one.Run = i
		res, err := r.Inner.Step(ctx, one)
		if err != nil {
			return res, fmt.Errorf("run %d of %d: %w", i, r.Runs, err)
		}
		runs = append(runs, res)
		if res.Interrupted || res.Stopped != "" {
			break
		}
	}
	res := combineRuns(runs, r.Confidence)
	if ctx.Err() != nil && len(runs) < r.Runs {
		res.Interrupted = true
		res.Notes = append(res.Notes, fmt.Sprintf("interrupted after %d of %d runs", len(runs), r.Runs))
	}
	if r.Dir != "" && len(runs) > 1 {
		if err := r.runSet(&res, spec); err != nil {
			return res, err
		}
	}
	return res, nil
}

// runSet analyzes the step's recordings as a run set into res.
func (r *RepeatStepper) runSet(res *StepResult, spec StepSpec) error {
	name := StepName(spec.Index, spec.Load)
	paths := analyze.FindRunSet(filepath.Join(r.Dir, name+".parquet"))
	if len(paths) < 2 {
		return nil
	}
	sums := make([]*analyze.Summary, len(paths))
	for i, p := range paths {
		s, err := analyze.Files([]string{p}, r.Options)
		if err != nil {
			return fmt.Errorf("analyzing %s: %w", p, err)
		}
		sums[i] = s
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	set, err := analyze.AggregateRuns(names, sums, r.Confidence)
	if err != nil {
		return fmt.Errorf("step %d: %w", spec.Index, err)
	}
	res.Repeat.Set = set
	if err := WriteFileAtomic(filepath.Join(r.Dir, name+".html"), set.WriteHTML); err != nil {
		return err
	}
	res.Recording, res.Report = name+".parquet", name+".html"
	return nil
}

// combineRuns is a step's result of its runs (see RepeatStepper).
func combineRuns(runs []StepResult, conf float64) StepResult {
	if len(runs) == 0 {
		return StepResult{}
	}
	res := runs[0]
	if len(runs) == 1 {
		return res
	}
	n := float64(len(runs))
	mean := func(f func(*StepResult) float64) float64 {
		var s float64
		for i := range runs {
			s += f(&runs[i])
		}
		return s / n
	}
	meanDist := func(f func(*StepResult) Dist) Dist {
		return Dist{
			Mean:   mean(func(r *StepResult) float64 { return f(r).Mean }),
			Median: mean(func(r *StepResult) float64 { return f(r).Median }),
			P50:    mean(func(r *StepResult) float64 { return f(r).P50 }),
			P90:    mean(func(r *StepResult) float64 { return f(r).P90 }),
			P99:    mean(func(r *StepResult) float64 { return f(r).P99 }),
		}
	}
	res.Requests, res.Completed, res.Failed, res.Canceled, res.Errors, res.Good = 0, 0, 0, 0, 0, 0
	res.Notes, res.HealthWarnings = nil, nil
	var tput, out []float64
	for i := range runs {
		r := &runs[i]
		res.Requests += r.Requests
		res.Completed += r.Completed
		res.Failed += r.Failed
		res.Canceled += r.Canceled
		res.Errors += r.Errors
		res.Good += r.Good
		tput, out = append(tput, r.Throughput), append(out, r.OutputThroughput)
		prefix := fmt.Sprintf("run %d: ", i+1)
		for _, s := range r.Notes {
			res.Notes = append(res.Notes, prefix+s)
		}
		for _, s := range r.HealthWarnings {
			res.HealthWarnings = append(res.HealthWarnings, prefix+s)
		}
		res.Interrupted = res.Interrupted || r.Interrupted
		if res.Stopped == "" && r.Stopped != "" {
			res.Stopped = prefix + r.Stopped
		}
	}
	if res.Requests > 0 {
		res.ErrorRate = float64(res.Errors) / float64(res.Requests)
		res.GoodFraction = float64(res.Good) / float64(res.Requests)
	}
	res.OfferedRate = mean(func(r *StepResult) float64 { return r.OfferedRate })
	res.DurationS = mean(func(r *StepResult) float64 { return r.DurationS })
	res.RequestThroughput = mean(func(r *StepResult) float64 { return r.RequestThroughput })
	res.OutputThroughput = mean(func(r *StepResult) float64 { return r.OutputThroughput })
	res.TotalTokenThroughput = mean(func(r *StepResult) float64 { return r.TotalTokenThroughput })
	res.Throughput = mean(func(r *StepResult) float64 { return r.Throughput })
	res.RequestGoodput = mean(func(r *StepResult) float64 { return r.RequestGoodput })
	worst := func(f func(*StepResult) float64) float64 {
		w := math.Inf(-1)
		for i := range runs {
			w = math.Max(w, f(&runs[i]))
		}
		return w
	}
	res.DispatchLagP99Ms = worst(func(r *StepResult) float64 { return r.DispatchLagP99Ms })
	res.SchedLatP99Ms = worst(func(r *StepResult) float64 { return r.SchedLatP99Ms })
	res.SendDelayP99Ms = worst(func(r *StepResult) float64 { return r.SendDelayP99Ms })
	res.ClientCPU = worst(func(r *StepResult) float64 { return r.ClientCPU })
	res.WallS = 0
	for i := range runs {
		res.WallS += runs[i].WallS
	}
	res.TTFT = meanDist(func(r *StepResult) Dist { return r.TTFT })
	res.TPOT = meanDist(func(r *StepResult) Dist { return r.TPOT })
	res.ITL = meanDist(func(r *StepResult) Dist { return r.ITL })
	res.E2EL = meanDist(func(r *StepResult) Dist { return r.E2EL })
	res.Checks = append([]Check(nil), runs[0].Checks...)
	for k := range res.Checks {
		c := &res.Checks[k]
		c.ValueMs, c.Samples = 0, 0
		for i := range runs {
			if k < len(runs[i].Checks) {
				rc := runs[i].Checks[k]
				c.ValueMs += rc.ValueMs / n
				c.Samples += rc.Samples
			}
		}
		c.Met = c.Samples > 0 && c.ValueMs <= c.ThresholdMs
	}
	res.Repeat = &StepRuns{Runs: len(runs), Confidence: conf, Throughput: interval(tput, conf), OutputThroughput: interval(out, conf)}
	return res
}

// repeated is the runs per step when the sweep repeated its steps, else 0.
func (s *Summary) repeated() int {
	for i := range s.Steps {
		if r := s.Steps[i].Repeat; r != nil {
			return r.Runs
		}
	}
	return 0
}

// writeRepeatText prints each repeated step's throughputs across its runs.
func (s *Summary) writeRepeatText(b *bufio.Writer) {
	n := s.repeated()
	if n == 0 {
		return
	}
	fmt.Fprintf(b, "runs:     %d per step; means with the %s%% confidence interval across runs (Student's t)\n", n, FormatValue(100*s.Steps[0].repeatConfidence()))
	fmt.Fprintf(b, "%-4s %-20s %5s %-32s %-32s\n", "step", "load", "runs", "thrpt/s mean [CI]", "output tok/s mean [CI]")
	for i := range s.Steps {
		r := &s.Steps[i]
		if r.Repeat == nil {
			continue
		}
		fmt.Fprintf(b, "%4d %-20s %5d %-32s %-32s\n", r.Index, r.Load.String(), r.Repeat.Runs, r.Repeat.Throughput.text(), r.Repeat.OutputThroughput.text())
	}
}

// writeRepeatHTML writes the same as a table.
func (s *Summary) writeRepeatHTML(b *strings.Builder) {
	if s.repeated() == 0 {
		return
	}
	fmt.Fprintf(b, "<h2 id=\"runs\">Runs per step</h2>\n<p>Means across each step's runs with the %s%% confidence interval of the mean (Student's t).</p>\n",
		FormatValue(100*s.Steps[0].repeatConfidence()))
	b.WriteString("<table>\n<tr><th>step</th><th>load</th><th>runs</th><th>throughput/s</th><th>output tok/s</th></tr>\n")
	for i := range s.Steps {
		r := &s.Steps[i]
		if r.Repeat == nil {
			continue
		}
		fmt.Fprintf(b, "<tr><td>%d</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td></tr>\n", r.Index, html.EscapeString(r.Load.String()),
			r.Repeat.Runs, html.EscapeString(r.Repeat.Throughput.text()), html.EscapeString(r.Repeat.OutputThroughput.text()))
	}
	b.WriteString("</table>\n")
}

// repeatConfidence is the confidence of the step's intervals (0 when not repeated).
func (r *StepResult) repeatConfidence() float64 {
	if r.Repeat == nil {
		return 0
	}
	return r.Repeat.Confidence
}

// text is "12.3 [11.9, 12.7]".
func (ri RunInterval) text() string {
	return fmt.Sprintf("%s [%s, %s]", rate(ri.Mean), rate(ri.CILow), rate(ri.CIHigh))
}
