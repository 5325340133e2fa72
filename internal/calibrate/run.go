package calibrate

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

// Result is one step's figures. Every *Ns is nanoseconds.
type Result struct {
	Step Step   `json:"step"`
	Name string `json:"name"`
	// Endpoint is the API the step ran on (chat without Config.Endpoints).
	Endpoint string `json:"endpoint"`
	// Join is how the step's stamps met the mock's: JoinEvents (a stream,
	// event i to event i) or JoinBody (one body per request: the client's
	// body-complete stamp to the mock's write of the body).
	Join string `json:"join"`

	Requests          int `json:"requests"`
	Errors            int `json:"errors"` // records with an error kind
	EventsClient      int `json:"events_client"`
	EventsServer      int `json:"events_server"`
	Matched           int `json:"matched"`
	Unmatched         int `json:"unmatched"`
	RequestsUnmatched int `json:"requests_unmatched"`
	// TokenMismatches counts matched events whose token counts differ
	// between the client and the mock (see Joined.TokenMismatches).
	TokenMismatches int     `json:"token_mismatches"`
	EventsPerS      float64 `json:"events_per_s"` // matched events over their client-stamp span

	LagP50Ns int64 `json:"dispatch_lag_p50_ns"`
	LagP99Ns int64 `json:"dispatch_lag_p99_ns"`
	LagMaxNs int64 `json:"dispatch_lag_max_ns"`

	// Err* are quantiles of (client stamp - server write time - offset).
	ErrMinNs int64 `json:"error_min_ns"`
	ErrP50Ns int64 `json:"error_p50_ns"`
	ErrP99Ns int64 `json:"error_p99_ns"`
	ErrMaxNs int64 `json:"error_max_ns"`
	// RawMedianNs is the median diff before the offset is removed.
	RawMedianNs int64 `json:"raw_median_diff_ns"`
	// TTFTInflP50Ns is the median over requests of (client stamp of the
	// first event - the server's write time of it), the offset not
	// removed: what the client adds to every TTFT it records, loopback
	// hand-off included.
	TTFTInflP50Ns int64 `json:"ttft_inflation_p50_ns"`
	// StampMode is the stamp mode the recording says it used
	// (trace.RunStamps.Mode), "" when it says none.
	StampMode string `json:"stamp_mode,omitempty"`
	// StampNote says why the mode differs from the one asked for.
	StampNote string `json:"stamp_note,omitempty"`
	// StampObserver is kernel-offset's arrival observer
	// (trace.RunStamps.Observer: the packet tap or the process).
	StampObserver string `json:"stamp_observer,omitempty"`
	// Scrapes and ScrapeFailures count the scrapes of the mock's /metrics
	// during a Scrape step; Burners the goroutines of a Burner step.
	Scrapes        int `json:"scrapes,omitempty"`
	ScrapeFailures int `json:"scrape_failures,omitempty"`
	Burners        int `json:"burners,omitempty"`
	// LiveSamples counts the records the live view of a LiveView "on"
	// step took from the recorder's tap; LiveDropped those it could not
	// take (its feed was full).
	LiveSamples int64 `json:"live_samples,omitempty"`
	LiveDropped int64 `json:"live_dropped,omitempty"`
	// Steady is the error over the steady-state window, where every
	// stream of the step is open; nil for rate and burst steps (a burst's
	// two waves are never open together) and when the window is empty. It does not decide Pass.
	Steady *Steady `json:"steady_state,omitempty"`

	ClientCores       float64 `json:"client_cores"` // CPU seconds / wall seconds of this process
	ClientRSSBytes    int64   `json:"client_rss_bytes"`
	MockCores         float64 `json:"mock_cores,omitempty"` // a child mock's CPU / the step's wall time
	MockLatenessP99Ns int64   `json:"mock_lateness_p99_ns"`
	WallSeconds       float64 `json:"wall_seconds"`

	Canceled string `json:"canceled,omitempty"`
	Pass     bool   `json:"pass"`
	Why      string `json:"why,omitempty"` // why it did not pass

	Recording string `json:"recording,omitempty"` // kept with Config.Dir

	diffs []int64 // sorted raw diffs, until finish
}

// Joins of Result.Join.
const (
	JoinEvents = "events" // streamed events, by index
	JoinBody   = "body"   // one non-streaming body per request
)

// Steady is a stream step's error over its steady-state window: events
// whose server write time lies strictly between the last stream's first
// event and the first stream's last event (Joined.SteadyFromNs/ToNs).
type Steady struct {
	StartNs  int64 `json:"start_ns"`  // window start after the step's first server write
	WindowNs int64 `json:"window_ns"` // window length
	Events   int   `json:"events"`    // matched events written inside it

	// Err* as Result's, over those events only.
	ErrP50Ns int64 `json:"error_p50_ns"`
	ErrP99Ns int64 `json:"error_p99_ns"`
	ErrMaxNs int64 `json:"error_max_ns"`

	// ClientCores is the client's CPU (this process and its arrival
	// observer) over the window / the window's length; 0 when the CPU
	// samples do not cover the window.
	ClientCores float64 `json:"client_cores"`
	// ClientCPUPerEventNs is the client's CPU over the window / Events:
	// the per-event cost with every stream open, without the ramp's
	// dials and request writes or the tail; 0 when the CPU samples do
	// not cover the window.
	ClientCPUPerEventNs float64 `json:"client_cpu_per_event_ns"`

	diffs []int64 // sorted raw diffs, until finish
}

// steadyOf is j's steady-state figures before the offset is removed, nil
// for a rate step or an empty window. cpu is the client's CPU sampled
// over the step (clock.Mono): the window, in server write time, is moved
// to the client's clock by the step's median difference (the same clock
// with a local mock; a remote one's constant offset otherwise), and the
// CPU read off at both ends.
func steadyOf(s Step, j *Joined, cpu []cpuSample) *Steady {
	if s.Kind == KindRate || s.Kind == KindBurst || len(j.SteadyDiffs) == 0 {
		return nil
	}
	st := &Steady{StartNs: j.SteadyFromNs - j.ServerFirstNs, WindowNs: j.SteadyWindowNs(),
		Events: len(j.SteadyDiffs), diffs: j.SteadyDiffs}
	shift := quantile(j.Diffs, 0.5)
	from, ok1 := cpuAt(cpu, j.SteadyFromNs+shift)
	to, ok2 := cpuAt(cpu, j.SteadyToNs+shift)
	if ok1 && ok2 && to >= from {
		st.ClientCores = (to - from) / float64(st.WindowNs)
		st.ClientCPUPerEventNs = (to - from) / float64(st.Events)
	}
	return st
}

// Report is a whole calibration.
type Report struct {
	Mode       string `json:"mode"` // process, inprocess or target
	Target     string `json:"target,omitempty"`
	Cores      int    `json:"cores"`
	GoMaxProcs int    `json:"gomaxprocs"`
	// ClientCPUs and MockCPUs are the CPUs the client and a child mock
	// were pinned to (Config.ClientCPUs), empty when not pinned.
	ClientCPUs []int  `json:"client_cpus,omitempty"`
	MockCPUs   []int  `json:"mock_cpus,omitempty"`
	Note       string `json:"note"`
	MaxErrorNs int64  `json:"max_error_ns"`
	OffsetNs   int64  `json:"offset_ns"` // removed from every diff (of the first stamp mode)
	// OffsetsNs is each stamp mode's offset (its own probe's median), with
	// Config.Stamps; a step's errors are taken against its mode's.
	OffsetsNs map[string]int64 `json:"offsets_ns,omitempty"`
	Offset    string           `json:"offset_method"`
	Steps     []Result         `json:"steps"`

	// Faithful is the heaviest passing stream step (by events/s), nil if
	// none passed; FaithfulRate the heaviest passing rate step.
	Faithful     *Result `json:"faithful,omitempty"`
	FaithfulRate *Result `json:"faithful_rate,omitempty"`
	Verdict      string  `json:"verdict"`
}

// Run runs the probe and the ladder and returns the report. A step that
// fails to run ends the calibration with an error; a step that runs but
// measures badly is reported as not passing.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tracekit-calibrate-"); err != nil {
			return nil, fmt.Errorf("creating a work directory: %w", err)
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}

	rep := &Report{Mode: cfg.Mode, Target: cfg.Target, Cores: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0),
		MaxErrorNs: int64(cfg.MaxError), Offset: "median client-minus-server difference of the probe step"}
	switch {
	case cfg.Target != "":
		rep.Mode = "target"
		rep.Note = "the mock runs at " + cfg.Target + "; on another host its clock differs by a constant the offset absorbs"
	case cfg.Mode == ModeInProcess:
		rep.Note = fmt.Sprintf("the mock runs inside this process: client CPU and RSS include it, and both share this machine's %d cores", rep.Cores)
	default:
		rep.Note = fmt.Sprintf("the mock runs as a child process: client CPU and RSS are the client's own, but both share this machine's %d cores", rep.Cores)
	}

	for i, s := range cfg.Ladder() {
		if err := checkFDs(cfg, size(s, cfg.Duration, cfg.itl(s), i)); err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i, s.Name(), err)
		}
	}
	if cfg.ClientCPUs > 0 {
		pin, err := pinClient(cfg.ClientCPUs, cfg.Target == "")
		if err != nil {
			return nil, err
		}
		defer pin.restore()
		cfg.pin = pin
		rep.ClientCPUs, rep.MockCPUs = pin.cpus()
		rep.GoMaxProcs = runtime.GOMAXPROCS(0)
		rep.Note += fmt.Sprintf("; the client is pinned to CPUs %v (GOMAXPROCS %d)", rep.ClientCPUs, rep.GoMaxProcs)
		if cfg.Target == "" {
			rep.Note += fmt.Sprintf(", the mock to CPUs %v", rep.MockCPUs)
		}
	}
	var runs []*stepRun
	for i, s := range cfg.Ladder() {
		if ctx.Err() != nil {
			break
		}
		cfg.Logf("step %d: %s ...", i, describe(s))
		r, err := runStep(ctx, cfg, dir, i, s)
		if err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i, s.Name(), err)
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("calibration interrupted before its first step: %w", ctx.Err())
	}
	var shared []mock.LogEntry
	if cfg.Target != "" {
		if shared, err = waitForLog(ctx, cfg.MockLog, cfg.LogWait, cfg.Logf); err != nil {
			return nil, err
		}
	}
	for _, r := range runs {
		if r.log == nil {
			r.log = shared
		}
		res, err := r.result()
		if err != nil {
			return nil, err
		}
		if cfg.Dir != "" {
			res.Recording = r.recording
		}
		rep.Steps = append(rep.Steps, res)
	}
	rep.finish(cfg.MaxError)
	if ctx.Err() != nil {
		return rep, fmt.Errorf("calibration interrupted after %d of %d steps: %w", len(runs), len(cfg.Ladder()), ctx.Err())
	}
	return rep, nil
}

// fmtRate writes a rate to three significant digits, whole from 100 up:
// "1333", "13.3", "0.5" (a rate derived from an ITL is rarely whole).
func fmtRate(v float64) string {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	decimals := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	p := math.Pow10(decimals)
	return strconv.FormatFloat(math.Round(v*p)/p, 'f', -1, 64)
}

func describe(s Step) string {
	var d string
	switch s.Kind {
	case KindRate:
		d = fmt.Sprintf("%s requests/s of %d tokens", fmtRate(s.Rate), RateTokens)
	case KindBurst:
		d = fmt.Sprintf("2 waves of %d streams started together, %s events/s", s.Streams, fmtRate(s.EventsPerS))
	case KindSaturated:
		d = fmt.Sprintf("%d streams, %s events/s (one every %v per stream)", s.Streams, fmtRate(s.EventsPerS), SaturatedITL)
	default:
		d = fmt.Sprintf("%d streams, %s events/s", s.Streams, fmtRate(s.EventsPerS))
	}
	if s.Burner {
		d += ", CPU burner beside the client"
	}
	if s.Scrape {
		d += ", scraping the mock's /metrics"
	}
	switch s.LiveView {
	case "off":
		d += ", into a recording file, no live view"
	case "on":
		d += ", into a recording file, live view fed (its dashboard drawing to nowhere)"
	}
	if s.Stamp != "" {
		d += ", stamp mode " + s.Stamp
	}
	return d
}

// result reads the step's records (its recording, or memory) and joins
// them with the log.
func (r *stepRun) result() (Result, error) {
	var recs []trace.Record
	var meta trace.RunMeta
	if r.mem != nil {
		recs, meta = r.mem.Records(), r.mem.RunMeta()
	} else {
		var err error
		if recs, meta, err = readRecording(r.recording); err != nil {
			return Result{}, fmt.Errorf("step %s: %w", r.plan.step.Name(), err)
		}
	}
	j := Join(recs, meta.StartMonoNs, r.log, r.plan.prefix)
	res := Result{
		Step: r.plan.step, Name: r.plan.step.Name(), Endpoint: r.plan.step.API(), Join: JoinEvents,
		TokenMismatches: j.TokenMismatches,
		Requests:        j.Requests, Errors: j.Errors, EventsClient: j.EventsClient, EventsServer: j.EventsServer,
		Matched: j.Matched(), Unmatched: j.Unmatched, RequestsUnmatched: j.RequestsUnmatched,
		LagP50Ns: r.health.DispatchLagP50Ns, LagP99Ns: r.health.DispatchLagP99Ns, LagMaxNs: r.health.DispatchLagMaxNs,
		RawMedianNs:   quantile(j.Diffs, 0.5),
		TTFTInflP50Ns: quantile(j.FirstDiffs, 0.5),
		Scrapes:       r.scrapes, ScrapeFailures: r.scrapeErr, Burners: r.burners,
		LiveSamples: r.live.samples, LiveDropped: r.live.dropped,
		ClientRSSBytes:    r.rssPeak,
		MockLatenessP99Ns: r.mockStats.LatenessP99Ns,
		WallSeconds:       r.wall.Seconds(),
		Canceled:          r.canceled,
	}
	if st := meta.Stamps; st != nil {
		res.StampMode, res.StampNote, res.StampObserver = st.Mode, st.Note, st.Observer
	}
	if r.health.WallSeconds > 0 {
		res.ClientCores = r.health.CPUSeconds / r.health.WallSeconds
	}
	if r.mockCPU > 0 && r.wall > 0 {
		res.MockCores = r.mockCPU / r.wall.Seconds()
	}
	if span := j.LastNs - j.FirstNs; span > 0 {
		res.EventsPerS = float64(j.Matched()) / (float64(span) / 1e9)
	}
	if !trace.Generates(res.Endpoint) {
		res.Join = JoinBody
	}
	res.diffs = j.Diffs
	res.Steady = steadyOf(r.plan.step, j, r.cpu)
	return res, nil
}
