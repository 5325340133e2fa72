package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/fnv1a"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/procs"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// lookahead is how long before a conversation's start the feeder launches
// its goroutine, so the goroutine is already waiting when the instant comes.
const lookahead = int64(5 * time.Millisecond)

// A first turn carrying media gets longer: its body of megabytes is
// encoded and copied into buffers first, which took up to about 20 ms for
// two 1024x1024 JPEGs (1.3 MB) on a 2-core virtual machine (the sends left
// that late with the 5 ms lead); leadPerMediaByte allows 25 ms a MB, up to
// maxLead.
const (
	leadPerMediaByte = 25 // ns
	maxLead          = int64(time.Second)
)

// launchLead is how long before conv's start its goroutine is launched.
func launchLead(conv []trace.Turn) int64 {
	return min(maxLead, lookahead+leadPerMediaByte*mediaOf(conv[0].Messages).bytes)
}

// probeMessages is the tiny prompt of the continuous-usage probe.
var probeMessages = []trace.Message{{Role: "user", Content: "Say hi."}}

// Stats is a snapshot of a run's progress.
type Stats struct {
	Total    int64 // requests the trace holds for this shard (an estimate under limits)
	Sent     int64
	Done     int64
	Errors   int64
	InFlight int64
	Elapsed  time.Duration
}

// Result is what a finished run reports.
type Result struct {
	Meta     trace.RunMeta
	Sent     int64
	Errors   int64
	Canceled string // why the run was cut short ("" if it ran to the end)
	// ToolCallMismatches counts answers whose tool calls differed from the
	// trace's; ParentFailed the graph requests not sent because a parent
	// failed (recorded as parent_failed, not in Sent or Errors);
	// CanceledByClient the requests canceled on purpose (in Sent, not in
	// Errors).
	ToolCallMismatches, ParentFailed, CanceledByClient int64
}

// Runner replays one Source. New validates and builds the clients;
// Prepare settles what the run needs to know about the targets; Run runs
// once. Record does all three.
type Runner struct {
	cfg     Config
	src     Source
	ownSrc  *FileSource // opened from Config.Trace; closed by Close
	meta    trace.TraceMeta
	tok     tokenizer.Tokenizer
	targets []*target
	conns   *connSet
	disp    Dispatcher
	precise *clock.Precise // owned, closed by Close; nil if cfg.Dispatcher given
	bo      bodyOptions
	mat     *materializer // makes virtual prompts' text (materialize.go); nil when the trace has none
	ahead   aheadBudget   // what the conversations read before they are due may hold

	slots     chan struct{} // request slots; nil: unlimited
	convSlots chan struct{} // conversation slots; nil: unlimited
	exPool    sync.Pool     // *exchange
	bodies    sync.Pool     // *[]byte: open-loop request bodies prepared ahead

	usage *trace.UsageProbe // the probe's finding
	// sendsChat: some turn goes to chat or completions (checkEndpoints),
	// so the probe, a chat or completions request, is worth sending.
	sendsChat bool
	checked   bool // checkEndpoints read the whole source; else feed checks each conversation
	// hasMedia: some message carries media (checkEndpoints), which the
	// prefetch stage makes before the requests are due.
	hasMedia bool
	// realMedia: the real items' hashes (checkEndpoints), each with where
	// the trace first carries it, in trace order; store holds their bytes.
	realMedia []mediaRef
	store     *trace.MediaStore // owned, closed by Close; nil without real items
	tracePath string            // the trace file read (a FileSource's), for messages

	media    *mediaServer // serves the media under Config.MediaURLBase; nil without
	prepared bool
	total    int64                    // requests the source holds for this shard (an estimate under limits)
	cur      atomic.Pointer[runState] // the run under way, once its clock started
}

// runState is the state of one run: its clock, its stop, its counters and its
// sink. The Runner's clients and settings are shared through the embedding.
type runState struct {
	*Runner
	start   int64        // clock.Mono() at the run start
	now     func() int64 // ns since start: the stamps of every record
	stopped atomic.Bool  // no new requests (limits, duration)
	stop    context.CancelFunc
	rr      atomic.Uint64 // round-robin cursor
	seq     atomic.Int64  // requests started
	mon     *monitor
	sink    record.Sink

	sent, done, errs, inflight atomic.Int64
	mismatches, parentFailed   atomic.Int64 // graph.go
	canceledByClient           atomic.Int64 // --cancel-rate: in sent, not in errs
}

// exchange is one request goroutine's reusable scratch.
type exchange struct {
	stream *record.Stream
	dec    decoders
	buf    []byte
	resp   []byte    // a non-streaming response body
	hresp  h1Resp    // the response being read
	push   *pushBody // its body's read by the poller (push.go), made at the first
	body   []byte
	rec    trace.Record
	out    outcome // what the last exchange saw
	// agent is the turn that started the agent context of the request
	// being sent (its graph's fresh-context node; 0 for a chat), which
	// Config.SessionPerAgent keys on; session is the request's session
	// key and withSession the body with it, when the run sends one.
	agent       int32
	session     []byte
	withSession []byte
	// media is what the next request's body carries of media (history
	// included), set by its sender before do: the record's MediaItems
	// and MediaBytes.
	media tally
}

// New validates cfg and builds the clients for a run of src; a nil src
// means the trace file cfg.Trace, which New opens and Close closes.
func New(cfg Config, src Source) (*Runner, error) {
	cfg, err := cfg.withDefaults(src != nil)
	if err != nil {
		return nil, err
	}
	if err := checkFileLimit(cfg.MaxConcurrency); err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, src: src, ahead: aheadBudget{prime: primeBytes, prefetch: prefetchBytes}}
	if src == nil {
		f, err := OpenFile(cfg.Trace)
		if err != nil {
			return nil, err
		}
		r.src, r.ownSrc = f, f
	}
	if err := r.build(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// build sets up what New promises once the source is open.
func (r *Runner) build() error {
	cfg := r.cfg
	r.meta = r.src.Meta()
	tok, err := tokenizer.Open(r.meta.Tokenizer)
	if err != nil {
		tok = tokenizer.Default()
	}
	r.tok = tok
	r.conns = newConnSet(&r.cfg)
	r.bo = bodyOptions{endpoint: cfg.Endpoint, ignoreEOS: cfg.IgnoreEOS, temperature: cfg.Temperature,
		continuousUsage: cfg.ContinuousUsage == "on", extra: cfg.extraInner(), reasoningEffort: cfg.ReasoningEffort}
	if err := r.checkEndpoints(); err != nil {
		return err
	}
	if err := r.openMediaStore(); err != nil {
		return err
	}
	if r.mat, err = newMaterializer(r.meta, r.hasMedia); err != nil {
		return err
	}
	if r.mat != nil {
		r.mat.store = r.store
	}
	if cfg.MediaURLBase != "" && r.hasMedia {
		if r.media, err = startMediaServer(cfg.MediaURLBase); err != nil {
			return err
		}
		r.media.store = r.store
		r.mat.urls = r.media
	}
	if cfg.MaxConcurrency > 0 {
		r.slots = make(chan struct{}, cfg.MaxConcurrency)
	}
	if cfg.MaxActiveConversations > 0 {
		r.convSlots = make(chan struct{}, cfg.MaxActiveConversations)
	}
	for _, base := range cfg.Targets {
		t, err := newTarget(base, &r.cfg, r.conns, &r.bo)
		if err != nil {
			return err
		}
		r.targets = append(r.targets, t)
	}
	r.disp = cfg.Dispatcher
	if r.disp == nil {
		p, err := clock.NewPrecise(DefaultSpin)
		if err != nil {
			return err
		}
		r.precise, r.disp = p, p
	}
	r.total = r.src.Len() / int64(cfg.Shards)
	if cfg.MaxRequests > 0 {
		r.total = min(r.total, int64(cfg.MaxRequests+cfg.Warmup))
	}
	r.bodies.New = func() any { return new([]byte) }
	r.exPool.New = func() any {
		return &exchange{stream: record.NewStream(r.tok), buf: make([]byte, 4<<10)}
	}
	return nil
}

// Close releases the trace file New opened, the dispatcher and every target's idle
// keep-alive connections. Without the last, the pools would keep them open
// until a later request found them stale: a process running one replay after
// another (calibrate's ladder) would run out of file descriptors.
func (r *Runner) Close() error {
	for _, t := range r.targets {
		t.cl.closeIdle()
	}
	if r.precise != nil {
		r.precise.Close()
	}
	if r.conns != nil { // nil when build failed before it
		r.conns.stamp.Close() // the arrival observer's process
	}
	if r.media != nil {
		r.media.close()
		r.media = nil
	}
	if r.store != nil {
		r.store.Close()
		r.store = nil
	}
	if r.ownSrc != nil {
		return r.ownSrc.Close()
	}
	return nil
}

// Stats returns the progress so far; safe to call during Run.
func (r *Runner) Stats() Stats {
	s := Stats{Total: r.total}
	if rn := r.cur.Load(); rn != nil {
		s.Sent, s.Done, s.Errors, s.InFlight = rn.sent.Load(), rn.done.Load(), rn.errs.Load(), rn.inflight.Load()
		s.Elapsed = time.Duration(max(0, clock.Mono()-rn.start)) // the clock may start a little ahead
	}
	return s
}

// HealthSoFar returns the client's health since the run started (the
// figures Run puts in the recording at the end, without warnings and
// without the arrival observer's CPU, which ends with the connections),
// nil before the clock started; safe to call during and after Run.
func (r *Runner) HealthSoFar() *trace.Health {
	rn := r.cur.Load()
	if rn == nil {
		return nil
	}
	return rn.mon.sample(false)
}

// ClientCPU is the client's CPU time so far in ns: this process's and
// its arrival observer's (which stays at its last figure once Close
// stopped it). Safe to call at any time after New; only differences of
// two readings mean anything.
func (r *Runner) ClientCPU() int64 {
	ns := cpuTime()
	if r.conns != nil {
		ns += r.conns.stamp.ObserverCPU()
	}
	return ns
}

// Config returns the configuration with defaults applied.
func (r *Runner) Config() Config { return r.cfg }

// Run waits for the targets, starts the clock and replays the trace,
// handing every request's record to sink. It returns when every
// conversation is done or ctx ends (or --benchmark-timeout passes): then
// in-flight requests are recorded as canceled. sink's run metadata is set
// at the start and again, with Health, at the end; the caller closes sink.
func (rr *Runner) Run(ctx context.Context, sink record.Sink) (*Result, error) {
	if !rr.prepared {
		if err := rr.Prepare(ctx); err != nil {
			return nil, err
		}
	}
	r := &runState{Runner: rr, sink: sink}
	r.now = func() int64 { return clock.Mono() - r.start }
	host, _ := os.Hostname()
	meta := trace.RunMeta{
		TracekitVersion: trace.Version, Targets: shownTargets(r.cfg.Targets), Host: host,
		Command: r.cfg.Command, Config: r.cfg.meta(), Trace: &r.meta, Usage: r.usage,
		Load:   &trace.RunLoad{Model: r.cfg.Model, MaxConcurrency: r.cfg.MaxConcurrency},
		Stamps: r.conns.stamp.Meta(),
	}

	defer r.setGC()()
	defer procs.Reserve(r.heldPs())() // before the look-ahead starts
	in, stopIn := r.input()
	defer stopIn()

	src := r.prime(in) // before the clock: the first dispatches pay no file I/O
	if err := r.startClock(ctx, &meta, src.headroom(r.scale)); err != nil {
		return nil, err // nothing was sent: a nil Result
	}
	r.mon = startMonitor(r.conns.stamp.ObserverCPU) // before cur: HealthSoFar reads it
	rr.cur.Store(r)
	sink.SetRunMeta(meta)

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var timeoutHit atomic.Bool
	if r.cfg.BenchmarkTimeout > 0 {
		t := time.AfterFunc(r.cfg.BenchmarkTimeout, func() { timeoutHit.Store(true); cancelRun() })
		defer t.Stop()
	}
	// Canceling the run interrupts every blocked read at once.
	defer context.AfterFunc(runCtx, r.conns.cancel)()
	stopCtx, stop := context.WithCancel(runCtx)
	defer stop()
	r.stop = func() { r.stopped.Store(true); stop() }
	if r.cfg.Duration > 0 {
		t := time.AfterFunc(time.Duration(r.start-clock.Mono())+r.cfg.Duration, r.stop) // the clock may start a little ahead
		defer t.Stop()
	}

	defer r.rampConcurrency(stopCtx)()
	var wg sync.WaitGroup
	feedErr := r.feed(runCtx, stopCtx, src, &wg)
	wg.Wait()

	meta.Health = r.mon.finish()
	meta.Stamps = r.conns.stamp.Meta()
	sink.SetRunMeta(meta)
	res := &Result{Meta: meta, Sent: r.sent.Load(), Errors: r.errs.Load(),
		ToolCallMismatches: r.mismatches.Load(), ParentFailed: r.parentFailed.Load(), CanceledByClient: r.canceledByClient.Load()}
	switch {
	case timeoutHit.Load():
		res.Canceled = fmt.Sprintf("--benchmark-timeout %v passed", r.cfg.BenchmarkTimeout)
	case ctx.Err() != nil:
		res.Canceled = context.Cause(ctx).Error()
	}
	return res, feedErr
}

// heldPs is how many Ps the run adds to the process (internal/procs) for
// goroutines that hold theirs: the media workers, and with them the
// stamped sockets' poller. With media, the runtime's monitor, idle between
// a few requests a second, took the poller's P back for others only after
// up to 14 ms, while the other P encoded an image. Without media nothing
// else holds a P for long, and on a busy process the monitor takes the
// poller's back within 20 us: no P is added (the saturated calibrate step
// on one client CPU measured the same either way, p99 27-64 us with it).
//
// A run with media also adds spareP: the clock wakes through the
// runtime's network poller, which a thread waits in only while a P is
// idle. With every P busy (the workers, the poller, the collector's
// sweeper yielding in a loop) the clock's timer was seen by the monitor's
// own poll, up to 10 ms late (an execution trace of a replay on one CPU).
func (r *runState) heldPs() int {
	n := r.mat.heldPs()
	if n > 0 {
		n += r.conns.stamp.HeldPs() + spareP
	}
	return n
}

// spareP is the P a run with media adds beyond its holders' (heldPs), so
// that one is idle, and a thread waits in the network poller, more often.
const spareP = 1

// DefaultGCPercent is the GOGC a run uses unless told otherwise. With
// 10,000 streams on 2 cores a collection cycle marks ~25 MB of goroutine
// stacks for 50-70 ms, its assists and its mark worker taking the cores the
// stream readers need: with GOGC=100 the client ran 5 cycles in a 5 s step
// and the event-stamp error p99 was 23-41 ms; with 400, 3.6-7 ms (tracekit
// calibrate --streams 10000 --events-per-s 40000 --duration 5s). The price
// is a larger heap between cycles (up to 5x the live heap).
const DefaultGCPercent = 400

// setGC applies cfg.GCPercent for the run and returns what restores it.
func (r *Runner) setGC() (restore func()) {
	gc := r.cfg.GCPercent
	if gc == 0 {
		gc = DefaultGCPercent
	}
	if gc < 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(gc)
	return func() { debug.SetGCPercent(old) }
}

// Prepare waits for the targets and settles what the run needs to know
// about them before the clock starts (ready checks, the model, the
// prefix-cache reset, the probe). Run calls it unless it already
// succeeded; calling it first lets a caller fail before it creates its
// outputs. Its error means no traffic was sent.
func (r *Runner) Prepare(ctx context.Context) error {
	if err := r.prepare(ctx); err != nil {
		return err
	}
	r.prepared = true
	return nil
}

func (r *Runner) prepare(ctx context.Context) error {
	for _, t := range r.targets {
		if r.cfg.ReadyTimeout > 0 {
			if err := t.waitReady(ctx, r.cfg.ReadyTimeout); err != nil {
				return err
			}
		}
	}
	if r.cfg.Model == "" {
		m, err := r.targets[0].firstModel()
		if err != nil {
			return err
		}
		r.cfg.Model = m
	}
	if r.cfg.ResetPrefixCache {
		for _, t := range r.targets {
			if err := t.resetPrefixCache(); err != nil {
				r.logf("warning: could not reset the prefix cache: %v", err)
			}
		}
	}
	return r.probe()
}

// probeTimeout bounds each pre-run probe request.
const probeTimeout = 60 * time.Second

// probe sends one tiny request of the run's kind to every target before
// the clock starts. A target that cannot be reached or refuses it (a
// wrong model: 404) fails the run here, with the real cause. It also
// settles continuous usage: with "auto" the run asks for
// continuous_usage_stats only when every target's probe events carried
// cumulative usage (Ollama accepts the field and ignores it; a strict
// server refuses it, and the probe is then repeated without it). The
// finding goes to RunMeta.Usage.
func (r *Runner) probe() error {
	mode := r.cfg.ContinuousUsage
	ask := mode != "off"
	u := &trace.UsageProbe{Mode: mode, Verified: ask}
	var reasons []string
	if r.cfg.NoProbe {
		ask = mode == "on"
		u.Requested, u.Verified, u.Reason = ask, false, "no probe (--no-probe)"
		r.bo.continuousUsage, r.usage = ask, u
		return nil
	}
	if !r.sendsChat {
		ask = mode == "on"
		u.Requested, u.Verified, u.Reason = ask, false, "no probe: no turn is sent on chat or completions"
		r.bo.continuousUsage, r.usage = ask, u
		return nil
	}
	for _, t := range r.targets {
		res, err := t.probe(r.cfg.Model, ask, probeTimeout)
		if err == nil && res.status/100 != 2 && ask && mode == "auto" {
			refused := res
			if res2, err2 := t.probe(r.cfg.Model, false, probeTimeout); err2 == nil && res2.status/100 == 2 {
				ask, res, u.Verified = false, res2, false
				reasons = append(reasons, fmt.Sprintf("%s refused continuous_usage_stats (HTTP %d: %s)", t.base, refused.status, snippetOf(bytes.TrimSpace(refused.body))))
			}
		}
		if err != nil {
			return fmt.Errorf("the probe request before the run (model %q): %w", r.cfg.Model, err)
		}
		if res.status/100 != 2 {
			return fmt.Errorf("the probe request before the run: %s answered HTTP %d for model %q: %s", t.base, res.status, r.cfg.Model, snippetOf(bytes.TrimSpace(res.body)))
		}
		if res.verdict != trace.ErrNone {
			r.logf("warning: the probe request to %s: %s: %s", t.base, res.verdict, res.verdictMsg)
		}
		if ask && !res.rec.TokensExact {
			u.Verified = false
			reasons = append(reasons, fmt.Sprintf("%s accepted continuous_usage_stats but its events carried no cumulative usage", t.base))
			if mode == "auto" {
				ask = false
			}
		}
	}
	switch {
	case mode == "off":
		reasons = append(reasons, "--continuous-usage off")
	case u.Verified:
		reasons = append(reasons, "every target's probe events carried cumulative usage")
	}
	u.Requested = ask
	u.Reason = strings.Join(reasons, "; ")
	if !u.Verified {
		r.logf("note: %s; tokens per event are counted with %s", u.Reason, r.tok.Name())
	}
	r.bo.continuousUsage = ask
	r.usage = u
	return nil
}

func (r *Runner) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

// feed takes src's conversations one at a time, in start order, and
// launches each shortly before its start. It stops at the end of the
// source or when stopCtx ends.
func (r *runState) feed(runCtx, stopCtx context.Context, src Source, wg *sync.WaitGroup) error {
	for {
		conv, err := src.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !r.checked && len(conv) > 0 && r.mine(conv) {
			if _, err := r.checkConv(conv); err != nil {
				return &TraceError{Path: r.cfg.Trace, Err: err}
			}
			if !r.hasMedia && convHasMedia(conv) {
				// nothing made its bytes: the source was not read before the run
				return &TraceError{Path: r.cfg.Trace, Err: fmt.Errorf("conversation %q carries media, which replay sends from a trace file or a MemorySource only", conv[0].ConversationID)}
			}
		}
		if len(conv) > 0 && !r.launch(runCtx, stopCtx, conv, wg) {
			return nil
		}
	}
}

// launch starts conv's goroutine once its start is near and a
// conversation slot is free; false means the run is stopping.
func (r *runState) launch(runCtx, stopCtx context.Context, conv []trace.Turn, wg *sync.WaitGroup) bool {
	if !r.mine(conv) {
		return true
	}
	at := r.start + r.scale(conv[0].StartOffsetNs)
	if _, err := r.disp.WaitUntil(stopCtx, at-launchLead(conv)); err != nil {
		return false
	}
	// onTime: no conversation slot held it back. One that waited for a
	// slot (--max-concurrency) goes when the slot frees, and its first
	// send's lateness is the load's limit, not the dispatcher's lag.
	onTime := true
	if r.convSlots != nil {
		select {
		case r.convSlots <- struct{}{}:
		default:
			onTime = false
			select {
			case r.convSlots <- struct{}{}:
			case <-stopCtx.Done():
				return false
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if r.convSlots != nil {
			defer func() { <-r.convSlots }()
		}
		if r.cfg.Timing == TimingTrace {
			r.openLoop(runCtx, stopCtx, conv)
		} else {
			r.closedLoop(runCtx, stopCtx, conv, at, onTime)
		}
	}()
	return true
}

// scale converts a trace offset to run time under --speed.
func (r *Runner) scale(ns int64) int64 { return int64(float64(ns) / r.cfg.Speed) }

// waitUntil waits for the absolute instant at and records the dispatch lag
// of real waits; false means the run is stopping. An arrival instant (every
// one in open loop, --timing trace, and in closed loop a conversation's
// first, unless it waited for a --max-concurrency slot) is the trace's time
// for the request, so one already past when its
// request was ready (its body took longer to build than the feeder's
// lookahead, or the run is behind) is recorded too, as how late it leaves:
// the health's dispatch lag never hides a late send. A later closed-loop
// turn's instant is its think time after the previous answer, and one
// already past is the client's own time between the two (building the
// body), not a wake-up's lateness.
func (r *runState) waitUntil(stopCtx context.Context, at int64, arrival bool) bool {
	if now := clock.Mono(); at-now <= 0 {
		if arrival || r.cfg.Timing == TimingTrace {
			r.mon.lag.Record(now - at)
		}
		return stopCtx.Err() == nil
	}
	lag, err := r.disp.WaitUntil(stopCtx, at)
	if err != nil {
		return false
	}
	r.mon.lag.Record(lag)
	return true
}

// pick returns the target of a request of conversation conv.
func (r *runState) pick(conv string) *target {
	if len(r.targets) == 1 {
		return r.targets[0]
	}
	if r.cfg.Policy == PolicyConversation {
		return r.targets[hash(conv)%uint64(len(r.targets))]
	}
	return r.targets[(r.rr.Add(1)-1)%uint64(len(r.targets))]
}

func hash(s string) uint64 { return fnv1a.String(s) }

// messages returns turn's new messages, with text synthesized for contents
// the trace redacted, and their token count.
func (r *Runner) messages(t *trace.Turn) ([]trace.Message, int32) {
	msgs := make([]trace.Message, len(t.Messages))
	var tokens int32
	for i, m := range t.Messages {
		m.Role, m.Content = strings.Clone(m.Role), strings.Clone(m.Content)
		if m.Content == "" && m.Tokens > 0 {
			m.Content = r.filler(t, i)
		}
		tokens += m.Tokens
		msgs[i] = m
	}
	if t.InputTokens > 0 {
		tokens = t.InputTokens
	}
	return msgs, tokens
}

// filler is the text synthesized for t's redacted message i.
func (r *Runner) filler(t *trace.Turn, i int) string {
	return fillerText(t.Messages[i].Tokens, r.cfg.Seed, fmt.Sprintf("%s/%d/%d", t.ConversationID, t.Turn, i))
}
