package sweep

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/telemetry"
	"github.com/tracekit/tracekit/trace"
)

// ErrUnreachable is wrapped by Preflight's error when a target does not
// answer HTTP at all.
var ErrUnreachable = errors.New("target unreachable")

// flatOut is the replay speed of a closed-loop step without a given speed:
// every conversation is due at once and starts as soon as a user is free.
const flatOut = 1e9

// ReplayOptions configure a ReplayStepper. Zero values are documented per
// field.
type ReplayOptions struct {
	// Base is every step's replay configuration; per step the stepper sets
	// Speed, MaxConcurrency, MaxActiveConversations, MaxRequests, Duration,
	// BenchmarkTimeout and Command. Warmup, Seed and ResetPrefixCache apply
	// to every step (each step is a fresh replay).
	Base replay.Config
	// Dir receives step-NN-<axis>-<value>.parquet and .html per step.
	Dir string
	// Speed is the time scale of the steps on the max-concurrency axis (0:
	// flat out, every conversation due at once); Rate, if set instead, is
	// their conversation start rate (run as speed Rate / TraceRate).
	Speed, Rate float64
	// MaxConcurrency limits requests in flight on the speed and rate axes
	// (0: no limit).
	MaxConcurrency int
	// StepRequests (measured requests per step) or StepDuration (how long a
	// step sends new requests): one of them.
	StepRequests int
	StepDuration time.Duration
	// StepTimeout ends a step, canceling its requests in flight (0: none).
	StepTimeout time.Duration
	// Slices, when above 0, cuts each step's recording into windows that
	// long (analyze.Options.Slices; StepResult.Slices).
	Slices time.Duration
	// DrainTimeout bounds the wait, after a step, for the targets to
	// report no running or waiting request on /metrics; 0 means 60 s.
	DrainTimeout time.Duration
	// Criteria and EarlyStop drive the early stop (see Watch); Criteria.SLO
	// also selects the analyzed percentiles.
	Criteria  Criteria
	EarlyStop bool
	// Progress receives progress lines every ProgressEvery (default 2 s).
	Progress      io.Writer
	ProgressEvery time.Duration
	// StepView, when set, watches each step live: it is called as the
	// step's recording opens and returns the recorder's Tap (the writer
	// goroutine hands it each written record; it must not wait) and the
	// stop called when the step's run ended. With StepDraws (it draws on
	// the terminal) the periodic progress lines are off; the step lines
	// stay.
	StepView  func(label string, r *replay.Runner) (tap func(*trace.Record), stop func())
	StepDraws bool
	// HTTPClient does the preflight and drain requests; default one with
	// a 5 s timeout (honouring Base.Insecure).
	HTTPClient *http.Client
	// Scrape, when set, scrapes its Endpoints during every step into the
	// step's own sidecar (its Recording, Path and Replace are set per step).
	Scrape *telemetry.SidecarOptions
}

// ReplayStepper runs each step as a fresh replay of the trace into its own
// recording, then analyzes it.
type ReplayStepper struct {
	o         ReplayOptions
	traceRate float64
	hc        *http.Client
}

var _ Stepper = (*ReplayStepper)(nil)

// NewReplayStepper checks o and reads the trace's start rate.
func NewReplayStepper(o ReplayOptions) (*ReplayStepper, error) {
	if o.Base.Trace == "" {
		return nil, errors.New("no trace given")
	}
	if o.Dir == "" {
		return nil, errors.New("no output directory given")
	}
	if (o.StepRequests > 0) == (o.StepDuration > 0) {
		return nil, errors.New("give exactly one of step requests and step duration")
	}
	if o.StepRequests < 0 || o.StepDuration < 0 || o.StepTimeout < 0 || o.Speed < 0 || o.Rate < 0 || o.MaxConcurrency < 0 {
		return nil, errors.New("negative step limits")
	}
	if o.Speed > 0 && o.Rate > 0 {
		return nil, errors.New("a fixed speed and a fixed rate at once")
	}
	for _, t := range o.Base.Targets {
		if err := replay.CheckTarget(t); err != nil {
			return nil, fmt.Errorf("--target %w", err)
		}
	}
	ts, err := trace.SummarizeTrace(o.Base.Trace)
	if err != nil {
		return nil, fmt.Errorf("reading the trace %s: %w", o.Base.Trace, err)
	}
	if ts.Rows == 0 {
		return nil, fmt.Errorf("the trace %s holds no request", o.Base.Trace)
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = time.Minute
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	s := &ReplayStepper{o: o, traceRate: ts.Starts.PerSecond, hc: o.HTTPClient}
	if o.Rate > 0 {
		if s.traceRate <= 0 {
			return nil, errors.New("the trace's conversations all start at once, so it has no start rate to scale: give a speed instead of a rate")
		}
		s.o.Speed = o.Rate / s.traceRate
	}
	if s.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if o.Base.Insecure {
			tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
		}
		s.hc = &http.Client{Timeout: 5 * time.Second, Transport: tr}
	}
	return s, nil
}

// TraceRate is the trace's conversation start rate per second (0 when its
// conversations all start at once): --rate R runs as speed R / TraceRate.
func (s *ReplayStepper) TraceRate() float64 { return s.traceRate }

// Preflight checks that every target answers HTTP and, when no model was
// given, settles it from the first target's /v1/models once for all steps.
func (s *ReplayStepper) Preflight(ctx context.Context) error {
	return s.reach(ctx, s.o.Base.Model == "")
}

// reach GETs every target's /v1/models: an error wrapping ErrUnreachable
// when one does not answer HTTP at all. settleModel takes the model from
// the first target's list.
func (s *ReplayStepper) reach(ctx context.Context, settleModel bool) error {
	for i, base := range s.o.Base.Targets {
		base = strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
		status, body, err := s.get(ctx, base+"/v1/models")
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		if i == 0 && settleModel && status/100 == 2 {
			var list struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if json.Unmarshal(body, &list) == nil && len(list.Data) > 0 && list.Data[0].ID != "" {
				s.o.Base.Model = list.Data[0].ID
			}
		}
	}
	return nil
}

// get sends a probe GET (X-Tracekit-Probe: 1) and returns the status and
// up to 1 MiB of body.
func (s *ReplayStepper) get(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Tracekit-Probe", "1")
	if s.o.Base.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.o.Base.APIKey)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", url, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading GET %s: %w", url, err)
	}
	return resp.StatusCode, b, nil
}

// StepName is the base name of step i's files: step-NN-<axis>-<value>.
func StepName(i int, l Load) string { return fmt.Sprintf("step-%02d-%s", i, l.Name()) }

// configure returns the replay configuration of a step at load l.
func (s *ReplayStepper) configure(spec StepSpec) (replay.Config, float64, error) {
	c := s.o.Base
	c.Targets = append([]string(nil), c.Targets...)
	c.Headers = maps.Clone(c.Headers)
	c.MaxConcurrency, c.MaxActiveConversations = s.o.MaxConcurrency, 0
	v := spec.Load.Value
	switch spec.Load.Axis {
	case AxisSpeed:
		c.Speed = v
	case AxisRate:
		if s.traceRate <= 0 {
			return c, 0, errors.New("the trace's conversations all start at once, so it has no start rate to scale: use the speed or max-concurrency axis")
		}
		c.Speed = v / s.traceRate
	case AxisConcurrency:
		c.MaxConcurrency, c.MaxActiveConversations = int(v), int(v)
		c.Speed = s.o.Speed
		if c.Speed == 0 {
			c.Speed = flatOut
		}
	default:
		return c, 0, fmt.Errorf("unknown axis %q", spec.Load.Axis)
	}
	c.MaxRequests, c.Duration, c.BenchmarkTimeout = s.o.StepRequests, s.o.StepDuration, s.o.StepTimeout
	c.Command = strings.TrimSpace(c.Command + fmt.Sprintf(" [sweep step %d: %s]", spec.Index, spec.Load))
	if spec.Run > 0 {
		c.Command = strings.TrimSuffix(c.Command, "]") + fmt.Sprintf(", run %d]", spec.Run)
	}
	offered := 0.0
	if c.Speed != flatOut {
		offered = c.Speed * s.traceRate
	}
	return c, offered, nil
}

// Step replays the trace at spec's load into DIR/step-NN-<axis>-<value>.parquet,
// drains the targets, analyzes the recording and writes its HTML report
// next to it.
func (s *ReplayStepper) Step(ctx context.Context, spec StepSpec) (_ StepResult, err error) {
	// A step's error goes into the sweep's summary: it must not carry a
	// credential a server echoed (a probe refused with the key quoted).
	scrub := redact.New()
	s.o.Base.AddSecrets(scrub)
	defer func() { err = scrub.Error(err) }()
	res := StepResult{Index: spec.Index, Load: spec.Load}
	name := StepName(spec.Index, spec.Load)
	if spec.Run > 0 { // run i of a repeated step: STEP-i, the set's runs
		name += "-" + strconv.Itoa(spec.Run)
	}
	recPath, htmlPath := filepath.Join(s.o.Dir, name+".parquet"), filepath.Join(s.o.Dir, name+".html")
	for _, p := range []string{recPath, record.JournalPath(recPath), htmlPath, trace.MetricsPath(recPath)} {
		if _, err := os.Lstat(p); err == nil {
			return res, fmt.Errorf("%s already exists: a sweep never replaces a recording", p)
		}
	}
	cfg, offered, err := s.configure(spec)
	if err != nil {
		return res, err
	}
	res.Speed, res.MaxConcurrency, res.OfferedConvRate = cfg.Speed, cfg.MaxConcurrency, offered
	if cfg.Speed == flatOut {
		res.Speed = 0
	}
	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var rec *record.Recorder
	var watch *Watch
	var sc *telemetry.Sidecar
	var ms *telemetry.MetaSink
	stopProgress := func() {}
	open := func(r *replay.Runner) (record.Sink, error) {
		var err error
		ro := record.RecorderOptions{Queue: max(1024, 2*cfg.MaxConcurrency), Scrub: scrub}
		stopView := func() {}
		if s.o.StepView != nil {
			ro.Tap, stopView = s.o.StepView(fmt.Sprintf("sweep step %d %s", spec.Index, spec.Load), r)
		}
		rec, err = record.NewRecorder(recPath, trace.RunMeta{TracekitVersion: trace.Version, Targets: cfg.Targets, Command: cfg.Command}, ro)
		if err != nil {
			stopView()
			return nil, err
		}
		var sink record.Sink = rec
		if s.o.EarlyStop {
			watch = NewWatch(rec, s.o.Criteria, s.o.StepRequests, s.o.StepDuration, func(reason string) {
				cancel(errors.New("stopped early: " + reason))
			})
			sink = watch
		}
		// The scraper starts with the run, so its clock and the recording's agree.
		sc, ms, sink = stepScrape(ctx, s.o.Scrape, recPath, sink, &res.Notes)
		stopLines := func() {}
		if s.o.StepView == nil || !s.o.StepDraws {
			stopLines = s.progress(spec, r)
		}
		stopProgress = func() { stopLines(); stopView() }
		return sink, nil
	}
	run := ""
	if spec.Run > 0 {
		run = fmt.Sprintf(" run %d", spec.Run)
	}
	s.logf("step %d%s (%s): %s%s", spec.Index, run, spec.Phase, spec.Load, offeredNote(offered, spec.Load.Axis))
	began := time.Now()
	out, runErr := replay.Record(stepCtx, cfg, nil, open)
	stopProgress()
	finishScrape(sc, ms, &res.Notes)
	var cfgErr *replay.ConfigError
	var prepErr *replay.PrepareError
	switch {
	case errors.As(runErr, &cfgErr):
		return res, fmt.Errorf("preparing the replay: %w", cfgErr.Err)
	case rec == nil && !errors.As(runErr, &prepErr):
		return res, runErr // the recording could not be created
	}
	var closeErr error
	if rec != nil {
		closeErr = rec.Close()
	}
	res.WallS = time.Since(began).Seconds()
	if out == nil { // the run did not start: nothing was sent
		os.Remove(recPath)
		if ctx.Err() != nil {
			res.Interrupted = true
			res.Notes = append(res.Notes, "interrupted before it started")
			return res, nil
		}
		if runErr == nil {
			runErr = errors.New("the replay did not start")
		}
		return res, fmt.Errorf("%w: %v", ErrUnreachable, runErr)
	}
	if runErr != nil {
		return res, fmt.Errorf("replaying %s: %w", cfg.Trace, runErr)
	}
	if closeErr != nil {
		return res, fmt.Errorf("writing %s: %w", recPath, closeErr)
	}
	res.Recording = name + ".parquet"
	if watch != nil {
		res.Stopped = watch.Reason()
	}
	res.Interrupted = ctx.Err() != nil
	// Failures from a target that has gone say nothing about the load: the
	// step could not run, and the sweep stops rather than judge it.
	if out.Errors > 0 && !res.Interrupted {
		if err := s.reach(ctx, false); err != nil && ctx.Err() == nil {
			return res, fmt.Errorf("%d of %d requests failed and the target stopped answering (the recording %s is kept, not judged): %w",
				out.Errors, out.Sent, res.Recording, err)
		}
	}
	if out.Canceled != "" && res.Stopped == "" && !res.Interrupted {
		res.Notes = append(res.Notes, "cut short: "+out.Canceled)
	}
	if !res.Interrupted {
		if note := s.drain(ctx); note != "" {
			res.Notes = append(res.Notes, note)
		}
	}
	opts := AnalyzeOptions(s.o.Criteria.SLO)
	opts.Slices = s.o.Slices
	sum, err := analyze.Files([]string{recPath}, opts)
	if err != nil {
		if errors.Is(err, analyze.ErrBadInput) && out.Sent == 0 {
			res.Notes = append(res.Notes, "no request was sent")
			return res, nil
		}
		return res, fmt.Errorf("analyzing %s: %w", recPath, err)
	}
	Measure(&res, sum, s.o.Criteria.SLO, out.Meta.Health, res.Stopped != "" || res.Interrupted)
	if s.o.StepRequests > 0 && res.Requests < s.o.StepRequests && res.Stopped == "" && !res.Interrupted && out.Canceled == "" {
		res.Notes = append(res.Notes, fmt.Sprintf("the trace ended after %d of %d measured requests", res.Requests, s.o.StepRequests))
	}
	if err := WriteFileAtomic(htmlPath, sum.WriteHTML); err != nil {
		return res, err
	}
	res.Report = name + ".html"
	return res, nil
}

func offeredNote(offered float64, a Axis) string {
	if offered <= 0 || a == AxisRate {
		return ""
	}
	return fmt.Sprintf(" (%s conversations/s)", FormatValue(offered))
}

func (s *ReplayStepper) logf(format string, args ...any) {
	if s.o.Progress != nil {
		fmt.Fprintf(s.o.Progress, format+"\n", args...)
	}
}

// progress prints the step's progress every ProgressEvery until stopped.
func (s *ReplayStepper) progress(spec StepSpec, r *replay.Runner) func() {
	if s.o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.o.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.logf("step %d %s: %s", spec.Index, spec.Load, s.progressLine(r.Stats()))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func (s *ReplayStepper) progressLine(st replay.Stats) string {
	line := fmt.Sprintf("%d/%d done, %d errors, %d in flight, %s elapsed", st.Done, st.Total, st.Errors, st.InFlight, st.Elapsed.Truncate(100*time.Millisecond))
	var left time.Duration
	switch {
	case s.o.StepDuration > 0:
		left = max(s.o.StepDuration-st.Elapsed, 0)
	case st.Done > 0 && st.Total > st.Done:
		left = time.Duration(float64(st.Elapsed) * float64(st.Total-st.Done) / float64(st.Done))
	default:
		return line
	}
	return line + ", ~" + left.Truncate(100*time.Millisecond).String() + " left"
}

// drain waits until every target reports no running or waiting request
// (vllm:num_requests_running and vllm:num_requests_waiting on /metrics),
// at most DrainTimeout. It returns a note when it could not tell or gave
// up; targets without those gauges are not waited for.
func (s *ReplayStepper) drain(ctx context.Context) string {
	deadline := time.Now().Add(s.o.DrainTimeout)
	for _, base := range s.o.Base.Targets {
		base = strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
		for {
			busy, ok := s.busy(ctx, base)
			if !ok {
				break
			}
			if busy == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Sprintf("%s still reported %g requests running or waiting after the %v drain timeout", base, busy, s.o.DrainTimeout)
			}
			select {
			case <-ctx.Done():
				return ""
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return ""
}

// busy reads running + waiting requests from base's /metrics; ok false
// when the target does not expose them.
func (s *ReplayStepper) busy(ctx context.Context, base string) (float64, bool) {
	status, body, err := s.get(ctx, base+"/metrics")
	if err != nil || status/100 != 2 {
		return 0, false
	}
	return busyGauges(body)
}

// busyGauges sums the samples of vllm:num_requests_running and
// vllm:num_requests_waiting in Prometheus text; ok false when neither is
// present.
func busyGauges(body []byte) (float64, bool) {
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "vllm:num_requests_running") && !strings.HasPrefix(line, "vllm:num_requests_waiting") {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		if name != "vllm:num_requests_running" && name != "vllm:num_requests_waiting" {
			continue
		}
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndex(rest, "}")
			if j < 0 {
				continue
			}
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}
