package calibrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/telemetry"
	"github.com/tracekit/tracekit/trace"
)

// maxRamp bounds how long a stream step takes to start all its streams:
// starting 10,000 connections at once measures the kernel's accept queue,
// not the client.
const maxRamp = time.Second

// plan is one step sized: what the trace asks and what the mock serves.
type plan struct {
	step      Step
	prefix    string        // conversation id prefix, unique per step
	requests  int           // one-turn conversations
	maxTokens int           // per request; events = maxTokens + 1 (the role chunk)
	spacing   time.Duration // between request starts
	itl       time.Duration // mock decode step (and prefill, unless prefill)
	prefill   time.Duration // mock prefill (time to the first event); 0: itl
	seqs      int           // mock batch capacity: nobody queues
	wave      time.Duration // burst: the second wave's start offset; 0 otherwise
}

// span is when p's last stream should end, from the run start.
func (p plan) span() time.Duration {
	return time.Duration(p.requests)*p.spacing + p.wave + time.Duration(p.maxTokens+1)*max(p.itl, p.prefill)
}

// size turns a step into a plan. A stream lasts about d: it emits
// d * EventsPerS / Streams events, one every ITL; streams start evenly over
// min(maxRamp, d/4). A rate step sends Rate*d requests Rate per second,
// each RateTokens tokens long. A burst step is two waves of Streams
// streams of d*EventsPerS/Streams events each; every stream of a wave
// starts at the same offset, the first wave at 0, the second when the
// first's last event is due:
//
//	wave = (maxTokens+1) * ITL    (the prefill, then one event per ITL)
func size(s Step, d, itl time.Duration, idx int) plan {
	p := plan{step: s, prefix: fmt.Sprintf("cal%02d-", idx), itl: itl}
	switch s.Kind {
	case KindRate:
		p.requests = max(1, int(math.Round(s.Rate*d.Seconds())))
		p.maxTokens = RateTokens
		p.spacing = time.Duration(float64(time.Second) / s.Rate)
		// Concurrency is rate * request time; leave twice that.
		p.seqs = 2*int(s.Rate*(time.Duration(RateTokens+1)*itl+50*time.Millisecond).Seconds()) + 16
	case KindBurst:
		p.requests = 2 * s.Streams
		events := max(2, int(math.Round(d.Seconds()*s.EventsPerS/float64(s.Streams))))
		p.maxTokens = events - 1
		p.wave = time.Duration(events) * itl
		p.seqs = 2*s.Streams + 16
	default:
		p.requests = s.Streams
		events := max(2, int(math.Round(d.Seconds()*s.EventsPerS/float64(s.Streams))))
		p.maxTokens = events - 1
		p.spacing = min(maxRamp, d/4) / time.Duration(s.Streams)
		p.seqs = s.Streams + 16
	}
	return p
}

// mockConfig is the mock's latency model for p: no jitter, no per-token
// or per-sequence cost, so every event is due exactly one ITL after the
// previous one and the first one ITL after arrival. Every answer runs to
// its max_tokens: replay asks so with ignore_eos, which a Messages request
// does not carry, so the drawn output length is set past any max_tokens.
func (p plan) mockConfig() mock.Config {
	c := mock.DefaultConfig()
	c.Latency = mock.Latency{
		PrefillBase: mock.Duration(cmp.Or(p.prefill, p.itl)), DecodeBase: mock.Duration(p.itl),
		TokensPerEvent: 1, MaxNumSeqs: p.seqs, OutputMean: 1 << 20, MaxModelLen: 1 << 20,
	}
	return c
}

// traceMeta is the metadata of a step's trace.
var traceMeta = trace.TraceMeta{TracekitVersion: trace.Version, Command: "tracekit calibrate", Source: "calibrate", Tokenizer: "o200k_base"}

// turns returns p's one-turn conversations in start order.
func (p plan) turns() []trace.Turn {
	turns := make([]trace.Turn, p.requests)
	for i := range turns {
		at := int64(i) * int64(p.spacing)
		if p.wave > 0 && i >= p.requests/2 {
			at = int64(p.wave)
		}
		id := p.prefix + strconv.Itoa(i)
		turns[i] = trace.Turn{
			ConversationID: id, StartOffsetNs: at, ArrivalOffsetNs: at,
			Messages:    []trace.Message{{Role: "user", Content: "calibration stream " + id, Tokens: 4}},
			InputTokens: 4, OutputTokens: int32(p.maxTokens), Endpoint: p.step.Endpoint,
		}
		switch p.step.Endpoint {
		case trace.EndpointEmbeddings: // a batch of two inputs
			turns[i].Messages = []trace.Message{{Role: trace.RoleInput, Content: "calibration input " + id, Tokens: 4},
				{Role: trace.RoleInput, Content: "calibration input two " + id, Tokens: 4}}
			turns[i].InputTokens, turns[i].OutputTokens = 8, 0
		case trace.EndpointRerank, trace.EndpointScore: // a query and two documents
			turns[i].Messages = []trace.Message{{Role: trace.RoleQuery, Content: "calibration query " + id, Tokens: 4},
				{Role: trace.RoleDocument, Content: "calibration document " + id, Tokens: 4},
				{Role: trace.RoleDocument, Content: "calibration document two " + id, Tokens: 4}}
			turns[i].InputTokens, turns[i].OutputTokens = 12, 0
		case trace.EndpointTranscriptions, trace.EndpointTranslations: // a second of audio to transcribe
			turns[i].Messages[0].Media = []trace.Media{{Kind: trace.MediaAudio, Format: "wav", DurationMs: 1000, Seed: int64(i)}}
		}
	}
	return turns
}

// writeTrace writes turns, p's trace, to path (kept with Config.Dir; the
// replay itself reads them from memory).
func (p plan) writeTrace(path string, turns []trace.Turn) error {
	w, err := trace.NewTraceWriter(path, traceMeta)
	if err != nil {
		return err
	}
	if err := w.Write(turns...); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// stepRun is what running one step left behind, before the join.
type stepRun struct {
	plan      plan
	recording string          // kept with Config.Dir, else ""
	mem       *record.Memory  // the records, without Config.Dir
	log       []mock.LogEntry // nil with a remote target: joined later
	mockStats mock.Stats
	mockCPU   float64
	health    trace.Health
	rssPeak   int64
	wall      time.Duration
	canceled  string // why the replay was cut short, "" if it ran to the end
	scrapes   int    // successful scrapes of the mock's /metrics (Step.Scrape)
	scrapeErr int    // failed ones
	burners   int    // goroutines the burner ran (Step.Burner)
	live      liveCounts
	cpu       []cpuSample // the client's CPU over the replay (ClientCPU, clock.Mono)
}

// runStep runs one step: starts its mock (unless cfg.Target), replays its
// trace from memory into a recording (a file kept with cfg.Dir, else in
// memory) and stops the mock.
func runStep(ctx context.Context, cfg Config, dir string, idx int, s Step) (*stepRun, error) {
	p := size(s, cfg.Duration, cfg.itl(s), idx)
	if cfg.Target == "" {
		p.prefill = cfg.Prefill
	}
	base := filepath.Join(dir, fmt.Sprintf("%02d-%s", idx, strings.NewReplacer("=", "-", "/", "-", "+", "-").Replace(s.Name())))
	run := &stepRun{plan: p}
	turns := p.turns()
	var sink record.Sink
	if cfg.Dir != "" {
		run.recording = base + ".recording.parquet"
		if err := p.writeTrace(base+".trace.parquet", turns); err != nil {
			return nil, fmt.Errorf("writing the step's trace: %w", err)
		}
	} else if s.LiveView != "" { // the live view taps a recorder: both steps of the pair write one
		run.recording = base + ".recording.parquet"
	} else {
		run.mem = &record.Memory{}
		sink = run.mem
	}

	need, _ := fdNeed(cfg, p)
	if err := waitForFDs(ctx, int(need), cfg.Logf); err != nil {
		return nil, err
	}
	target, model := cfg.Target, ""
	var m runningMock
	if target == "" {
		var err error
		if cfg.Mode == ModeInProcess {
			m, err = startInProcess(p.mockConfig())
		} else {
			m, err = startChild(cfg.MockCommand, cfg.MockEnv, p.mockConfig(), base+".mock.parquet")
		}
		if err != nil {
			return nil, err
		}
		if c, ok := m.(*childMock); ok && cfg.pin != nil {
			if err := cfg.pin.pinMock(c.cmd.Process.Pid); err != nil {
				m.Stop()
				return nil, err
			}
		}
		target, model = m.URL(), p.mockConfig().Model
	}
	stopMock := func() error {
		if m == nil {
			return nil
		}
		log, st, cpu, err := m.Stop()
		m = nil
		run.log, run.mockStats, run.mockCPU = log, st, cpu
		return err
	}
	defer stopMock()

	debug.FreeOSMemory() // the previous step's garbage must not count here
	var scr *telemetry.Scraper
	if s.Scrape {
		var err error
		if scr, err = telemetry.New(telemetry.Options{Endpoints: []string{telemetry.MetricsURL(target)},
			Interval: cfg.ScrapeInterval, Sink: &telemetry.Memory{}}); err != nil {
			return nil, fmt.Errorf("setting up the scrape of %s: %w", target, err)
		}
	}
	rss := startRSSSampler(50 * time.Millisecond)
	var burn *burner
	if s.Burner {
		burn, run.burners = startBurner(cfg.Burners, BurnSlice), cfg.Burners
	}
	if scr != nil {
		if err := scr.Start(ctx); err != nil {
			return nil, fmt.Errorf("starting the scrape of %s: %w", target, err)
		}
	}
	began := time.Now()
	h, canceled, err := replayInto(ctx, p, replay.NewMemorySource(traceMeta, turns), target, model, run.recording, sink, &run.live, &run.cpu)
	run.wall = time.Since(began)
	if scr != nil {
		scr.Stop()
		for _, st := range scr.Stats() {
			run.scrapes += int(st.Scrapes - st.Failures)
			run.scrapeErr += int(st.Failures)
		}
	}
	if burn != nil {
		burn.Stop()
	}
	run.rssPeak = rss.stop()
	if err != nil {
		return nil, err
	}
	run.health, run.canceled = h, canceled
	if err := stopMock(); err != nil {
		return nil, err
	}
	return run, nil
}

// replayInto replays src, the step's trace, against target into sink, or
// with a nil sink into a recording at out, and returns the client's health
// and why it was cut short ("" if it was not). A LiveView "on" step's
// view counts what it took into lc; the client's CPU, sampled over the
// replay, goes to cpu. The run is bounded: every
// stream should end by ramp + duration, so anything beyond a generous
// margin is canceled (and recorded as such).
func replayInto(ctx context.Context, p plan, src replay.Source, target, model, out string, sink record.Sink, lc *liveCounts, cpu *[]cpuSample) (trace.Health, string, error) {
	span := p.span()
	var rec *record.Recorder
	var view *liveView
	var cs *cpuSampler
	defer func() { *cpu = cs.stop() }()  // after Record's Close: the observer's last CPU is in
	defer func() { *lc = view.stop() }() // after the recorder's close: its last records went through the tap
	open := func(r *replay.Runner) (record.Sink, error) {
		cs = startCPUSampler(r.ClientCPU)
		return sink, nil
	}
	if sink == nil {
		open = func(r *replay.Runner) (record.Sink, error) {
			cs = startCPUSampler(r.ClientCPU)
			ro := record.RecorderOptions{Queue: max(1024, 2*p.requests)}
			if p.step.LiveView == "on" {
				view = startLiveView(r, p.step.Name())
				ro.Tap = view.offer
			}
			var err error
			rec, err = record.NewRecorder(out, trace.RunMeta{TracekitVersion: trace.Version, Targets: []string{target}}, ro)
			return rec, err
		}
	}
	res, runErr := replay.Record(ctx, replay.Config{
		Targets: []string{target}, Model: model,
		IgnoreEOS: true, ContinuousUsage: "on",
		IdleTimeout: 30 * time.Second, ReadyTimeout: 10 * time.Second,
		BenchmarkTimeout: 2*span + time.Minute, StampMode: p.step.Stamp,
		Command: "tracekit calibrate (" + p.step.Name() + ")",
	}, src, open)
	var cfgErr *replay.ConfigError
	if errors.As(runErr, &cfgErr) {
		return trace.Health{}, "", fmt.Errorf("preparing the replay: %w", cfgErr.Err)
	}
	var closeErr error
	if rec != nil {
		closeErr = rec.Close()
	}
	if runErr != nil {
		return trace.Health{}, "", fmt.Errorf("replaying step %s: %w", p.step.Name(), runErr)
	}
	if closeErr != nil {
		return trace.Health{}, "", fmt.Errorf("writing %s: %w", out, closeErr)
	}
	if res == nil || res.Meta.Health == nil {
		return trace.Health{}, "", fmt.Errorf("step %s: the replay did not start", p.step.Name())
	}
	return *res.Meta.Health, res.Canceled, nil
}

// readRecording reads every record of a recording, each with its own
// event slices.
func readRecording(path string) ([]trace.Record, trace.RunMeta, error) {
	return trace.ReadRecords(path)
}

// rssSampler records the peak resident set of this process between start
// and stop. getrusage's maxrss is the peak of the whole process life, so
// it cannot tell one step from the previous, larger one.
type rssSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak int64
}

func startRSSSampler(every time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), peak: currentRSS()}
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.peak = max(s.peak, currentRSS())
			}
		}
	})
	return s
}

// stop ends sampling and returns the peak in bytes.
func (s *rssSampler) stop() int64 {
	close(s.done)
	s.wg.Wait()
	return max(s.peak, currentRSS())
}

// currentRSS is this process's resident set in bytes (0 if unknown).
func currentRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// itl is the inter-event time the step's mock will serve: the step's own,
// or a remote mock's.
func (c Config) itl(s Step) time.Duration {
	if c.Target != "" {
		return c.TargetITL
	}
	return s.ITL()
}

// fdNeed is how many descriptors p needs in this process, and why.
func fdNeed(cfg Config, p plan) (uint64, string) {
	streams := min(p.requests, p.seqs)
	if cfg.Target == "" && cfg.Mode == ModeInProcess {
		return 2*uint64(streams) + 256, "two sockets per stream with the mock in this process"
	}
	return uint64(streams) + 256, "one socket per stream"
}

// checkFDs fails early when the step's sockets cannot fit this process's
// file-descriptor limit (Go raises the soft limit to the hard one at
// start): every stream is a socket here, and a second one when the mock
// runs in this process. Otherwise the run would stall in accept errors.
func checkFDs(cfg Config, p plan) error {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return nil
	}
	need, per := fdNeed(cfg, p)
	if need > lim.Cur {
		return fieldErr("Mode", "%d concurrent streams need about %d file descriptors (%s), the limit is %d: raise it (ulimit -n) or use %s %s",
			min(p.requests, p.seqs), need, per, lim.Cur, fielderr.Name("Mode"), ModeProcess)
	}
	return nil
}

// openFDs is the number of file descriptors this process has open.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// fdWait bounds how long a step waits for the previous step's sockets.
const fdWait = 75 * time.Second

// waitForFDs waits until this process has room for need more descriptors,
// so that a step that cannot fit under the limit says so instead of failing
// thousands of dials. replay.Runner.Close closes its connections, so
// between steps this returns at once; the wait covers sockets another part
// of the process (an in-process mock's) has not closed yet.
func waitForFDs(ctx context.Context, need int, logf func(string, ...any)) error {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return nil
	}
	deadline := time.Now().Add(fdWait)
	for told := false; ; {
		open := openFDs()
		if uint64(open+need) <= lim.Cur {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d file descriptors are still open and the step needs %d more, over the limit of %d", open, need, lim.Cur)
		}
		if !told {
			logf("waiting up to %v for %d sockets of the previous step to close (the step needs %d descriptors, the limit is %d)", fdWait, open, need, lim.Cur)
			told = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
