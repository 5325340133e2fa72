package sweep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// Stepper runs one step at a load and measures it. The search depends on
// nothing else, so it is tested with a fake whose capacity is known;
// ReplayStepper is the real one. Step returns an error only when the step
// could not run (target unreachable, a file could not be written): the
// sweep stops. A step cut short by ctx returns its result with
// Interrupted set.
type Stepper interface {
	Step(ctx context.Context, spec StepSpec) (StepResult, error)
}

// StepFunc adapts a function to Stepper.
type StepFunc func(ctx context.Context, spec StepSpec) (StepResult, error)

// Step calls f.
func (f StepFunc) Step(ctx context.Context, spec StepSpec) (StepResult, error) { return f(ctx, spec) }

var _ Stepper = StepFunc(nil)

// StepSpec is what a step is asked to run.
type StepSpec struct {
	Index int    // 1-based
	Load  Load   // the load
	Phase string // for progress: "ladder 2/5", "bracket", "bisect, at most 3 more"
	// Run is the run of a repeated step (RepeatStepper), from 1; 0 when
	// steps are not repeated.
	Run int
}

// Info describes the sweep's setup for its summary; Run copies it.
type Info struct {
	Command string   `json:"command,omitempty"`
	Trace   string   `json:"trace,omitempty"`
	Targets []string `json:"targets,omitempty"`
	// TraceRate is the trace's conversation start rate (starts - 1) /
	// (last start - first start), per second: speed s offers s x TraceRate.
	TraceRate float64 `json:"trace_rate,omitempty"`
	// Setup holds the per-step settings (requests or duration, warm-up,
	// seed, ...), as the caller names them.
	Setup map[string]any `json:"setup,omitempty"`
}

// Config is a sweep: what to run and how to judge it.
type Config struct {
	Plan     Plan
	Criteria Criteria
	Info     Info
	// RetryDistorted is how many times a load whose step the client
	// distorted, and which would otherwise have passed, is run again (a new
	// step each time) before the distorted result stands. A distorted step
	// that failed anyway counts as failing at once: it can only bound the
	// answer from above, and the answer notes it.
	RetryDistorted int
	// OnStep, if set, is called after every step with the summary so far
	// (the caller writes it, so a killed sweep keeps its finished steps).
	OnStep func(*Summary)
}

// Summary is a sweep's result: every step, the knee and the SLO answer.
type Summary struct {
	TracekitVersion string       `json:"tracekit_version"`
	Info            Info         `json:"info"`
	Plan            Plan         `json:"plan"`
	Criteria        Criteria     `json:"criteria"`
	Steps           []StepResult `json:"steps"`
	Knee            *Knee        `json:"knee,omitempty"`
	Answer          *Answer      `json:"answer,omitempty"` // with an SLO
	Interrupted     bool         `json:"interrupted,omitempty"`
	Error           string       `json:"error,omitempty"`
}

// Knee is where the throughput curve flattens: among the steps that ran to
// their end undistorted, MaxThroughput is the highest steady throughput,
// and the knee is the lowest-load step reaching KneeShare of it. Reached
// says a higher-load undistorted step exists (one stopped early counts
// with MinSamples completions) whose throughput grew by less than half as
// much as its load did, relative to the knee: the curve was seen past the
// knee. Early-stopped steps never set MaxThroughput: their few completions
// overstate it (the first requests of a step finish at the offered rate).
type Knee struct {
	Step            int     `json:"step"`
	Load            float64 `json:"load"`
	OfferedConvRate float64 `json:"offered_conv_rate"`
	Throughput      float64 `json:"throughput"`
	MaxThroughput   float64 `json:"max_throughput"`
	Reached         bool    `json:"reached"`
}

// KneeShare is the share of the highest throughput the knee reaches.
const KneeShare = 0.95

// Answer is the highest load that met the SLO, with the two steps that
// bound it: Lower passed, Upper (the lowest non-passing load above it)
// did not. Lower 0: no load passed; Upper 0: every load passed (the answer
// is at least Load). Without an answer (Found false) Reason says why.
type Answer struct {
	Found bool `json:"found"`
	// Reason, when Found is false: no load met the SLO, the client could
	// not measure faithfully (Unmeasured), or the sweep stopped before it
	// could answer (Summary.Error: a step could not run).
	Reason string `json:"reason,omitempty"`
	// Unmeasured: no load passed and the lowest load run met every
	// objective but was distorted by the client (its own health check
	// failed), so the client, not the deployment, decided the sweep.
	Unmeasured      bool    `json:"unmeasured,omitempty"`
	Load            float64 `json:"load"`
	OfferedConvRate float64 `json:"offered_conv_rate"`
	Throughput      float64 `json:"throughput"`
	Lower           int     `json:"lower_step"`
	Upper           int     `json:"upper_step"`
	UpperLoad       float64 `json:"upper_load"`
	// Ratio is UpperLoad / Load - 1: how tightly the answer is bounded.
	Ratio    float64  `json:"ratio"`
	Resolved bool     `json:"resolved"` // a search that reached its resolution
	Notes    []string `json:"notes,omitempty"`
}

// Run runs the sweep: every load of a ladder, lowest first, or a search.
// It returns the summary so far with Interrupted set when ctx ends, and
// with the error when a step could not run.
func Run(ctx context.Context, st Stepper, cfg Config) (*Summary, error) {
	if err := cfg.Plan.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Criteria.Validate(); err != nil {
		return nil, err
	}
	if cfg.Plan.Search != nil && len(cfg.Criteria.SLO) == 0 {
		return nil, errors.New("a search needs an SLO to tell passing steps")
	}
	r := &runner{ctx: ctx, st: st, cfg: cfg, sum: &Summary{
		TracekitVersion: trace.Version, Info: cfg.Info, Plan: cfg.Plan, Criteria: cfg.Criteria}}
	var err error
	if cfg.Plan.Search != nil {
		err = r.search()
	} else {
		for i, v := range cfg.Plan.Ladder {
			if _, err = r.step(v, fmt.Sprintf("ladder %d/%d", i+1, len(cfg.Plan.Ladder))); err != nil {
				break
			}
		}
	}
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil {
		r.sum.Error = err.Error()
	}
	r.sum.finish()
	return r.sum, err
}

// errStop ends the sweep without an error: interrupted.
var errStop = errors.New("sweep interrupted")

type runner struct {
	ctx context.Context
	st  Stepper
	cfg Config
	sum *Summary
}

// step runs one step at load v and judges it, again up to RetryDistorted
// times while the client distorts a step that would otherwise pass.
func (r *runner) step(v float64, phase string) (*StepResult, error) {
	res, err := r.once(v, phase)
	for try := 0; err == nil && res.Distorted && len(res.Reasons) == 0 && try < r.cfg.RetryDistorted; try++ {
		res, err = r.once(v, phase+", again: the client distorted the last run")
	}
	return res, err
}

func (r *runner) once(v float64, phase string) (*StepResult, error) {
	if r.ctx.Err() != nil {
		r.sum.Interrupted = true
		return nil, errStop
	}
	spec := StepSpec{Index: len(r.sum.Steps) + 1, Load: Load{Axis: r.cfg.Plan.Axis, Value: v}, Phase: phase}
	res, err := r.st.Step(r.ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("step %d (%s): %w", spec.Index, spec.Load, err)
	}
	res.Index, res.Load = spec.Index, spec.Load
	r.cfg.Criteria.Judge(&res)
	r.sum.Steps = append(r.sum.Steps, res)
	if res.Interrupted || r.ctx.Err() != nil {
		r.sum.Interrupted = true
	}
	r.sum.finish()
	if r.cfg.OnStep != nil {
		r.cfg.OnStep(r.sum)
	}
	if r.sum.Interrupted {
		return nil, errStop
	}
	return &r.sum.Steps[len(r.sum.Steps)-1], nil
}

// search brackets then bisects; see SearchSpec.
func (r *runner) search() error {
	s := *r.cfg.Plan.Search
	maxSteps := cmp.Or(s.MaxSteps, DefaultMaxSteps)
	integer := r.cfg.Plan.Axis.Integer()
	fix := func(v float64) float64 {
		if integer {
			return math.Round(v)
		}
		return v
	}
	var lo, hi float64 // highest passing, lowest failing; 0: none yet
	load := fix(s.Start)
	for len(r.sum.Steps) < maxSteps {
		res, err := r.step(load, "bracket")
		if err != nil {
			return err
		}
		prev := load
		if res.Pass {
			lo = load
			if hi > 0 || load >= s.Max {
				break
			}
			load = fix(min(2*load, s.Max))
		} else {
			hi = load
			if lo > 0 || load <= s.Min {
				break
			}
			load = fix(max(load/2, s.Min))
		}
		if load == prev {
			break
		}
	}
	for lo > 0 && hi > 0 && len(r.sum.Steps) < maxSteps {
		if hi/lo-1 <= s.Resolution || (integer && hi-lo <= 1) {
			return nil
		}
		mid := midpoint(lo, hi, integer)
		res, err := r.step(mid, fmt.Sprintf("bisect, at most %d more", bisectSteps(lo, hi, s.Resolution, integer)))
		if err != nil {
			return err
		}
		if res.Pass {
			lo = mid
		} else {
			hi = mid
		}
	}
	return nil
}

// midpoint is the geometric mean of lo and hi (rounded to a whole number
// inside (lo, hi) on an integer axis). It is not rounded otherwise, so a
// search is scale-invariant: a rate search probes exactly the speeds the
// equivalent speed search does.
func midpoint(lo, hi float64, integer bool) float64 {
	m := math.Sqrt(lo * hi)
	if integer {
		return min(max(math.Round(m), lo+1), hi-1)
	}
	return m
}

// bisectSteps bounds the bisection steps left from [lo, hi]: each halves
// log(hi/lo), which must fall to log(1 + resolution).
func bisectSteps(lo, hi, res float64, integer bool) int {
	n := 0
	for ratio := hi / lo; ratio-1 > res && (!integer || lo*(ratio-1) > 1); ratio = math.Sqrt(ratio) {
		n++
	}
	return n
}

// finish computes the knee and the answer from the steps so far. A sweep
// stopped by a step that could not run (Error) has no answer: the loads
// it did not get to might have passed, and a dead target's failures are no
// verdict on a load.
func (s *Summary) finish() {
	s.Knee = knee(s.Steps)
	s.Answer = nil
	if len(s.Criteria.SLO) == 0 {
		return
	}
	s.Answer = answer(s.Steps, s.Plan)
	if s.Error != "" {
		u := &Answer{Reason: "the sweep stopped: " + s.Error}
		if a := s.Answer; a.Found {
			u.Notes = append(u.Notes, fmt.Sprintf("before it stopped, the highest load that met the SLO was step %d (%s)", a.Lower, Load{s.Plan.Axis, a.Load}))
		}
		s.Answer = u
	}
}

// byLoad returns the steps sorted by load (ties by step number).
func byLoad(steps []StepResult) []*StepResult {
	out := make([]*StepResult, len(steps))
	for i := range steps {
		out[i] = &steps[i]
	}
	slices.SortStableFunc(out, func(a, b *StepResult) int { return cmp.Compare(a.Load.Value, b.Load.Value) })
	return out
}

func knee(steps []StepResult) *Knee {
	var ok, seen []*StepResult // ran to the end; and those plus early-stopped ones with MinSamples completions
	for _, r := range byLoad(steps) {
		if r.Distorted || r.Interrupted || r.Throughput <= 0 {
			continue
		}
		if r.Stopped == "" {
			ok = append(ok, r)
		}
		if r.Stopped == "" || r.Completed >= MinSamples {
			seen = append(seen, r)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	top := 0.0
	for _, r := range ok {
		top = max(top, r.Throughput)
	}
	for _, r := range ok {
		if r.Throughput < KneeShare*top {
			continue
		}
		k := &Knee{Step: r.Index, Load: r.Load.Value, OfferedConvRate: r.OfferedConvRate, Throughput: r.Throughput, MaxThroughput: top}
		for _, h := range seen {
			if h.Load.Value > r.Load.Value && h.Throughput/r.Throughput-1 < 0.5*(h.Load.Value/r.Load.Value-1) {
				k.Reached = true
			}
		}
		return k
	}
	return nil
}

// clientBound says r did not pass only because the client distorted it:
// by every other criterion it passed.
func clientBound(r *StepResult) bool {
	return r.Distorted && len(r.Reasons) == 0 && !r.Interrupted
}

// Unmeasured returns the step showing that the client could not measure
// the sweep faithfully: no step passed, and the lowest load run (its last
// verdict) failed only because the client distorted it. Nil otherwise.
func (s *Summary) Unmeasured() *StepResult {
	var lowest *StepResult
	for _, r := range byLoad(s.Steps) {
		if r.Pass {
			return nil
		}
		if r.Interrupted {
			continue
		}
		if lowest == nil || r.Load.Value == lowest.Load.Value {
			lowest = r // of several runs at one load, the last stands
		}
	}
	if lowest == nil || !clientBound(lowest) {
		return nil
	}
	return lowest
}

// answer walks the steps by load: Upper is the first that did not pass
// (interrupted steps are not verdicts; of several steps at one load, the
// last run stands), Lower the highest passing step below it.
func answer(steps []StepResult, p Plan) *Answer {
	a := &Answer{}
	last := map[float64]int{} // load -> index of its last verdict
	for _, r := range steps {
		if !r.Interrupted {
			last[r.Load.Value] = r.Index
		}
	}
	var lower, upper *StepResult
	for _, r := range byLoad(steps) {
		if r.Interrupted || last[r.Load.Value] != r.Index {
			continue
		}
		if r.Pass {
			if upper == nil {
				lower = r
			} else {
				a.Notes = append(a.Notes, fmt.Sprintf("step %d (%s) passed above the failing step %d: the results are not monotone in load", r.Index, r.Load, upper.Index))
			}
			continue
		}
		if upper == nil {
			upper = r
		}
	}
	switch {
	case lower != nil:
		a.Found, a.Load, a.Lower = true, lower.Load.Value, lower.Index
		a.OfferedConvRate, a.Throughput = lower.OfferedConvRate, lower.Throughput
	case upper != nil && clientBound(upper):
		a.Unmeasured = true
		a.Reason = fmt.Sprintf("the client could not measure faithfully: step %d (%s) met every objective, but the client's own health check failed: %s",
			upper.Index, upper.Load, strings.Join(upper.Distortions, "; "))
	default:
		a.Reason = "no load met the SLO"
	}
	if upper != nil {
		a.Upper, a.UpperLoad = upper.Index, upper.Load.Value
		if upper.Distorted && !a.Unmeasured {
			a.Notes = append(a.Notes, fmt.Sprintf("the upper bound, step %d, was distorted by the client: the deployment may take more than the client could offer", upper.Index))
		}
	} else if lower != nil {
		a.Notes = append(a.Notes, "every load met the SLO: the answer is at least the highest load run")
	}
	if lower != nil && upper != nil {
		a.Ratio = upper.Load.Value/lower.Load.Value - 1
		if p.Search != nil {
			a.Resolved = a.Ratio <= p.Search.Resolution || (p.Axis.Integer() && upper.Load.Value-lower.Load.Value <= 1)
			if !a.Resolved {
				a.Notes = append(a.Notes, fmt.Sprintf("the search stopped before its resolution (%.1f%% apart)", 100*a.Ratio))
			}
		}
	}
	return a
}
