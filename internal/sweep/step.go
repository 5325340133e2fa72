package sweep

import (
	"math"
	"runtime"
	"slices"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/trace"
)

// Dist is one latency metric of a step, in milliseconds, with vLLM's
// definitions (analyze's Summary).
type Dist struct {
	Mean   float64 `json:"mean_ms" parquet:"mean_ms"`
	Median float64 `json:"median_ms" parquet:"median_ms"`
	P50    float64 `json:"p50_ms" parquet:"p50_ms"`
	P90    float64 `json:"p90_ms" parquet:"p90_ms"`
	P99    float64 `json:"p99_ms" parquet:"p99_ms"`
}

// StepResult is one step: its load, the vLLM metrics of its recording,
// its SLO measurements, the client's health and the verdict. Rates are per
// second; latencies in milliseconds.
type StepResult struct {
	Index int  `json:"step"`
	Load  Load `json:"load"`
	// Speed and MaxConcurrency are what replay ran with (Speed 0 when the
	// step started conversations as fast as users were free).
	Speed          float64 `json:"speed"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	Recording      string  `json:"recording,omitempty"` // relative to the sweep directory
	Report         string  `json:"report,omitempty"`    // the step's analyze HTML, likewise

	// OfferedConvRate is the nominal load: conversation starts per second
	// (Speed x the trace's start rate); 0 in closed loop.
	OfferedConvRate float64 `json:"offered_conv_rate"`
	// OfferedRate is the measured offered request rate over the same
	// trim as Throughput: the intended sends between the 10th and the 90th
	// percentile of them, per second between those two; 0 when they were
	// all due at once (closed loop).
	OfferedRate float64 `json:"offered_rate"`

	Requests  int `json:"requests"` // measured (warm-up excluded)
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"` // of Failed: canceled in flight
	// Errors are the failures that count: Failed, less Canceled when the
	// sweep canceled them (it stopped the step, or was interrupted).
	Errors    int     `json:"errors"`
	ErrorRate float64 `json:"error_rate"` // Errors / Requests

	// vLLM's figures over the benchmark duration.
	DurationS            float64 `json:"duration_s"`
	RequestThroughput    float64 `json:"request_throughput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	// Throughput is the steady completion rate: the completion rate of
	// the step's steady window (Steady) when that window covers at least
	// half the step and holds SteadyMinCompleted completions; else the
	// successful requests' completions between the 10th and the 90th
	// percentile completion, divided by the time between them. Either way
	// neither the ramp-up nor the drain weighs on it. The curves and the
	// knee use it; ThroughputFrom says which rule gave it.
	Throughput     float64 `json:"throughput"`
	ThroughputFrom string  `json:"throughput_from"` // "steady" or "p10-p90"
	// Steady is the step's steady window (analyze.SteadyState: the longest
	// stretch with at least 0.8 of the peak in flight) and its figures.
	Steady *StepSteady `json:"steady,omitempty"`
	// Slices are the step cut into windows by time (ReplayOptions.Slices),
	// each with its offered rate, throughput, mean in flight, TTFT and ITL.
	Slices []analyze.WindowFigures `json:"slices,omitempty"`

	// Per-request goodput: Good requests met every objective's threshold.
	Good           int     `json:"good"`
	GoodFraction   float64 `json:"good_fraction"`   // Good / Requests
	RequestGoodput float64 `json:"request_goodput"` // Good / DurationS (vLLM's request_goodput)

	TTFT Dist `json:"ttft"`
	TPOT Dist `json:"tpot"`
	ITL  Dist `json:"itl"`
	E2EL Dist `json:"e2el"`

	Checks []Check `json:"checks,omitempty"` // one per objective

	// Client health, from the recording's run metadata.
	DispatchLagP99Ms float64  `json:"dispatch_lag_p99_ms"`
	SchedLatP99Ms    float64  `json:"sched_latency_p99_ms"`
	SendDelayP99Ms   float64  `json:"send_delay_p99_ms"`
	ClientCPU        float64  `json:"client_cpu"` // CPU s / wall s / GOMAXPROCS
	HealthWarnings   []string `json:"health_warnings,omitempty"`
	Distorted        bool     `json:"distorted"`
	Distortions      []string `json:"distortions,omitempty"`

	// Server is the targets' /metrics during the step (server.go).
	Server *StepServer `json:"server,omitempty"`

	// Repeat is a repeated step's figures across its runs (sweep
	// --repeat, repeat.go); the figures above are then the runs' means.
	Repeat *StepRuns `json:"repeat,omitempty"`

	Stopped     string   `json:"stopped,omitempty"` // why the sweep stopped the step early
	Interrupted bool     `json:"interrupted,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	WallS       float64  `json:"wall_s"`

	Pass    bool     `json:"pass"`
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons,omitempty"`
}

// Percentiles every step reports.
var reportPercentiles = []float64{50, 90, 99}

// AnalyzeOptions are the analysis options of a step under slo: the
// reported percentiles and the SLO's, every metric, and vLLM's goodput
// for the objectives it knows (so the step's own report shows it).
func AnalyzeOptions(slo SLO) analyze.Options {
	ps := append([]float64(nil), reportPercentiles...)
	var g analyze.SLO
	for _, o := range slo {
		ps = append(ps, o.P)
		switch o.Metric {
		case MetricTTFT:
			g.TTFTms = ptr(o.ThresholdMs())
		case MetricTPOT:
			g.TPOTms = ptr(o.ThresholdMs())
		case MetricE2EL:
			g.E2ELms = ptr(o.ThresholdMs())
		}
	}
	slices.Sort(ps)
	return analyze.Options{Percentiles: slices.Compact(ps), Metrics: []string{"ttft", "tpot", "itl", "e2el"}, Goodput: g}
}

// ptr returns a pointer to v.
func ptr(v float64) *float64 { return &v }

// pct returns the P-th percentile of st (one of the analyzed ones; 0 if
// it is not, so the files never hold NaN).
func pct(st analyze.Stats, p float64) float64 {
	for _, x := range st.Percentiles {
		if x.P == p && !math.IsNaN(x.Value) {
			return x.Value
		}
	}
	return 0
}

func dist(st analyze.Stats) Dist {
	return Dist{Mean: st.Mean, Median: st.Median, P50: pct(st, 50), P90: pct(st, 90), P99: pct(st, 99)}
}

// requestValue is a request's own value of a metric for per-request
// goodput, in ns: TTFT, TPOT and E2EL as vLLM's --goodput (TPOT 0 for one
// output token), ITL as the request's mean gap (LastNs - FirstNs) /
// (output tokens - 1), guidellm's request ITL.
func requestValue(q *analyze.Request, metric string) float64 {
	switch metric {
	case MetricTTFT:
		return float64(q.TTFTNs)
	case MetricTPOT:
		return q.TPOTNs
	case MetricITL:
		return q.ITLMeanNs
	}
	return float64(q.E2ELNs)
}

// good is the per-request goodput test: a successful request whose every
// objective's metric is at most its threshold.
func (s SLO) good(q *analyze.Request) bool {
	if !q.Success {
		return false
	}
	for _, o := range s {
		if requestValue(q, o.Metric) > float64(o.Threshold) {
			return false
		}
	}
	return true
}

// Measure fills r's metrics from the analysis of its recording (made with
// AnalyzeOptions(slo)) and the run's health. excludeCanceled leaves the
// requests canceled in flight out of the error rate (the sweep canceled
// them when it stopped the step).
func Measure(r *StepResult, s *analyze.Summary, slo SLO, h *trace.Health, excludeCanceled bool) {
	r.Requests, r.Completed, r.Failed = s.Requests, s.Completed, s.Failed
	r.Canceled = 0
	for _, e := range s.Errors {
		if e.Kind == string(trace.ErrCanceled) {
			r.Canceled = e.Count
		}
	}
	r.Errors = r.Failed
	if excludeCanceled {
		r.Errors -= r.Canceled
	}
	if r.Requests > 0 {
		r.ErrorRate = float64(r.Errors) / float64(r.Requests)
	}
	r.DurationS = s.Duration
	r.RequestThroughput, r.OutputThroughput, r.TotalTokenThroughput = s.RequestThroughput, s.OutputThroughput, s.TotalTokenThroughput
	r.TTFT, r.TPOT, r.ITL, r.E2EL = dist(s.TTFT), dist(s.TPOT), dist(s.ITL), dist(s.E2EL)
	r.Server = measureServer(s)

	var intended, done []int64
	r.Good = 0
	for i := range s.Reqs {
		q := &s.Reqs[i]
		intended = append(intended, q.IntendedNs)
		if q.Success {
			done = append(done, q.DoneNs)
		}
		if slo.good(q) {
			r.Good++
		}
	}
	r.Steady = stepSteady(s)
	r.Slices = s.Slices
	r.Throughput, r.ThroughputFrom = rateOf(done, 0.1), "p10-p90"
	if st := r.Steady; st != nil && st.Completed >= SteadyMinCompleted && st.DurationS >= s.Duration/2 {
		r.Throughput, r.ThroughputFrom = st.RequestThroughput, "steady"
	}
	if r.Throughput == 0 {
		r.Throughput = s.RequestThroughput
	}
	// Offered with the throughput's trim (the central 80% of the sends,
	// as of the completions), so the two compare: with the whole span for
	// one and the trimmed span for the other the measured curve sat above
	// the offered one at every step.
	r.OfferedRate = rateOf(intended, 0.1)
	if r.Requests > 0 {
		r.GoodFraction = float64(r.Good) / float64(r.Requests)
	}
	if s.Duration > 0 {
		r.RequestGoodput = float64(r.Good) / s.Duration
	}

	r.Checks = r.Checks[:0]
	for _, o := range slo {
		var st analyze.Stats
		switch o.Metric {
		case MetricTTFT:
			st = s.TTFT
		case MetricTPOT:
			st = s.TPOT
		case MetricITL:
			st = s.ITL
		default:
			st = s.E2EL
		}
		r.Checks = append(r.Checks, Check{Metric: o.Metric, P: o.P, ThresholdMs: o.ThresholdMs(), ValueMs: pct(st, o.P), Samples: st.Count})
	}
	r.SendDelayP99Ms = pct(s.SendDelay, 99)
	if h != nil {
		r.DispatchLagP99Ms = float64(h.DispatchLagP99Ns) / 1e6
		r.SchedLatP99Ms = float64(h.SchedLatP99Ns) / 1e6
		if h.WallSeconds > 0 {
			r.ClientCPU = h.CPUSeconds / h.WallSeconds / float64(runtime.GOMAXPROCS(0))
		}
		r.HealthWarnings = append([]string(nil), h.Warnings...)
	}
}

// rateOf is the rate of events at times ts (ns) between the trim-th and
// the (1-trim)-th quantile of them: (j - i) / (t_j - t_i) per second with
// i = floor(trim (n-1)), j = ceil((1-trim) (n-1)); 0 when undefined.
func rateOf(ts []int64, trim float64) float64 {
	n := len(ts)
	if n < 2 {
		return 0
	}
	slices.Sort(ts)
	i := int(math.Floor(trim * float64(n-1)))
	j := int(math.Ceil((1 - trim) * float64(n-1)))
	if j <= i || ts[j] <= ts[i] {
		return 0
	}
	return float64(j-i) / (float64(ts[j]-ts[i]) / 1e9)
}
