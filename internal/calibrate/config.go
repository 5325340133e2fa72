package calibrate

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/trace"
)

// Modes of running the mock.
const (
	ModeProcess   = "process"   // a `tracekit mock` child process per step
	ModeInProcess = "inprocess" // mock.Start in this process
)

// Step kinds.
const (
	KindProbe   = "probe"   // quiet step whose median diff is the offset
	KindStreams = "streams" // N long streams emitting M events/s together
	KindRate    = "rate"    // short requests arriving at R per second
	KindBurst   = "burst"   // two waves of N identical streams, each started together
	// KindSaturated is N streams at SaturatedITL: a load that saturates a
	// client given few CPUs (Config.ClientCPUs), to see each stamp mode
	// where the client is the bottleneck.
	KindSaturated = "saturated"
)

// SaturatedITL is a saturated step's inter-event time (a 50 tokens/s
// decode): 1,000 streams are 50,000 events/s.
const SaturatedITL = 20 * time.Millisecond

// DefaultBurstITL is a burst step's inter-event time: every stream of a
// wave emits at the same instants, so each tick the mock writes N events at
// once.
const DefaultBurstITL = 250 * time.Millisecond

// Probe step size: enough events for a stable median, little load.
const (
	ProbeStreams    = 20
	ProbeEventsPerS = 400 // 20 events/s per stream
)

// Rate steps send short requests: this many tokens, one event each, at
// RateITL apart, after a RateITL prefill.
const (
	RateTokens = 4
	RateITL    = 5 * time.Millisecond
)

// Step is one rung of the ladder.
type Step struct {
	Kind       string  `json:"kind"`
	Streams    int     `json:"streams,omitempty"`      // KindStreams, KindProbe: concurrent streams
	EventsPerS float64 `json:"events_per_s,omitempty"` // target events/s across all streams
	Rate       float64 `json:"rate,omitempty"`         // KindRate: requests per second
	// Burner runs a CPU burner beside the client during the step
	// (burner.go).
	Burner bool `json:"burner,omitempty"`
	// Scrape scrapes the mock's /metrics during the step, as replay
	// --scrape does (Config.ScrapeInterval).
	Scrape bool `json:"scrape,omitempty"`
	// LiveView marks the steps of a live pair (Config.LivePairs): "off"
	// records to a file without a live view, "on" feeds the live view
	// from the recorder's tap as --progress dashboard does, its dashboard
	// program drawing to nowhere; "" is not a live pair.
	LiveView string `json:"live_view,omitempty"`
	// Stamp is the replay stamp mode of the step (replay.Config.StampMode);
	// "" is replay's default.
	Stamp string `json:"stamp,omitempty"`
	// Endpoint is the API the step's requests go to (trace.Endpoints);
	// "" is chat, named in no step (a run without Config.Endpoints).
	Endpoint string `json:"endpoint,omitempty"`
}

// API is the endpoint the step sends on: Endpoint, or chat.
func (s Step) API() string {
	if s.Endpoint == "" {
		return trace.EndpointChat
	}
	return s.Endpoint
}

// offsetKey names the probe whose offset a step's errors are taken
// against: one probe per endpoint and stamp mode ("" without either).
func (s Step) offsetKey() string {
	switch {
	case s.Endpoint != "" && s.Stamp != "":
		return s.Endpoint + "/" + s.Stamp
	case s.Endpoint != "":
		return s.Endpoint
	}
	return s.Stamp
}

// Name is a short label for tables and file names.
func (s Step) Name() string { return s.base() + s.suffix() }

func (s Step) base() string {
	switch s.Kind {
	case KindRate:
		return fmt.Sprintf("rate=%g", s.Rate)
	case KindProbe:
		return "probe"
	case KindBurst:
		return fmt.Sprintf("burst=%d", s.Streams)
	case KindSaturated:
		return fmt.Sprintf("saturated=%d", s.Streams)
	}
	return fmt.Sprintf("streams=%d", s.Streams)
}

// suffix names a step's variations: "+burn", "+scrape", "/" stamp mode,
// "@" endpoint.
func (s Step) suffix() string {
	var out string
	if s.Burner {
		out += "+burn"
	}
	if s.Scrape {
		out += "+scrape"
	}
	if s.LiveView != "" {
		out += "+view-" + s.LiveView
	}
	if s.Stamp != "" {
		out += "/" + s.Stamp
	}
	if s.Endpoint != "" {
		out += "@" + s.Endpoint
	}
	return out
}

// ITL is the inter-event time of one stream of the step.
//
//	streams: ITL = Streams / EventsPerS    (each stream's share of the rate)
//	rate:    ITL = RateITL
//	burst:   ITL = Streams / EventsPerS    (as streams)
func (s Step) ITL() time.Duration {
	if s.Kind == KindRate {
		return RateITL
	}
	return time.Duration(float64(s.Streams) / s.EventsPerS * float64(time.Second))
}

// Config is a calibration run. The zero value of each field means its
// documented default (see withDefaults).
type Config struct {
	Streams    []int     // stream steps; default 1000, 5000, 10000
	EventsPerS []float64 // per stream step, or one value for all; default 4 per stream
	Rates      []float64 // rate steps (requests/s); default none
	Duration   time.Duration
	MaxError   time.Duration // p99 error a step may have to pass; default 1 ms

	// Bursts are burst steps: N streams of identical length started
	// together, then N more started as the first wave ends (the wave
	// boundary), each stream emitting every BurstITL for Duration.
	Bursts   []int
	BurstITL time.Duration // default DefaultBurstITL
	// Burn are stream steps (sized as Streams') run with a CPU burner
	// beside the client: Burners goroutines (default GOMAXPROCS) of
	// BurnSlice spins between yields (burner.go).
	Burn    []int
	Burners int
	// Prefill is the mock's time to a stream's first event; 0: the step's
	// ITL. A short prefill beside a long ITL is how a TTFT is measured
	// while thousands of other streams are open.
	Prefill time.Duration
	// Saturated are stream steps of N streams at SaturatedITL each, meant
	// to saturate a client pinned to few CPUs (ClientCPUs).
	Saturated []int
	// ClientCPUs, when not 0, pins the client (this process, and the
	// arrival observer it starts) to that many of its CPUs and a child
	// mock to the rest, as taskset would, with GOMAXPROCS to match; the
	// pinning is undone at the end. Not with ModeInProcess.
	ClientCPUs int
	// ScrapePairs are stream steps run twice, back to back: without and
	// with scraping the mock's /metrics every ScrapeInterval (default 1 s),
	// so scraping's effect on the stamps is measured in one run.
	ScrapePairs    []int
	ScrapeInterval time.Duration
	// LivePairs are stream steps run twice, back to back, each into a
	// recording file: without and with the live view fed from the
	// recorder's tap (Step.LiveView), so the view's effect on the stamps
	// and the dispatch lag is measured in one run.
	LivePairs []int
	// Stamps are replay stamp modes (replay.Config.StampMode); every step,
	// the probe included, runs once per mode, the modes of one step back to
	// back, and each mode's errors are taken against its own probe's
	// offset. Empty: one run per step in replay's default mode.
	Stamps []string
	// Endpoints are the APIs (trace.Endpoints) every step, the probe
	// included, runs on: once per endpoint, back to back (inside that, once
	// per stamp mode), each endpoint's errors against its own probe's
	// offset. Streaming APIs join event by event; embeddings, rerank and
	// score answer one body, joined on its completion (Result.Join).
	// Empty: chat only, as a step without an endpoint.
	Endpoints []string

	Mode string // ModeProcess (default) or ModeInProcess; ignored with Target
	// MockCommand starts a `tracekit mock` (program and leading args, e.g.
	// [/usr/bin/tracekit mock]); Run appends --listen, --config and
	// --emit-log. Needed for ModeProcess.
	MockCommand []string
	MockEnv     []string // extra environment of the child

	Target    string        // base URL of a mock already running (no mock is started)
	MockLog   string        // with Target: the log that mock writes (--emit-log)
	LogWait   time.Duration // with Target: how long to wait for the log; default 2 min
	TargetITL time.Duration // with Target: that mock's --decode-base, to size streams; default 15 ms

	// Dir keeps each step's trace, recording and log; empty: the trace and
	// the records stay in memory and a child mock's log goes to a temporary
	// directory removed at the end.
	Dir string
	// Logf receives progress lines; may be nil.
	Logf func(format string, args ...any)

	pin *pinning // set by Run with ClientCPUs
}

// Validate reports the first invalid setting of c, as Run would.
func Validate(c Config) error {
	_, err := c.withDefaults()
	return err
}

// withDefaults returns c with defaults applied, or an error naming the
// first invalid setting.
func (c Config) withDefaults() (Config, error) {
	if c.Streams == nil {
		c.Streams = []int{1000, 5000, 10000}
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.MaxError == 0 {
		c.MaxError = time.Millisecond
	}
	if c.Mode == "" {
		c.Mode = ModeProcess
	}
	if c.LogWait == 0 {
		c.LogWait = 2 * time.Minute
	}
	if c.TargetITL == 0 {
		c.TargetITL = 15 * time.Millisecond
	}
	if c.BurstITL == 0 {
		c.BurstITL = DefaultBurstITL
	}
	if c.Burners == 0 {
		c.Burners = runtime.GOMAXPROCS(0)
	}
	if c.ScrapeInterval == 0 {
		c.ScrapeInterval = time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	switch {
	case c.Duration < 100*time.Millisecond:
		return c, fieldErr("Duration", "%s %v: expected at least 100ms per step", fielderr.Name("Duration"), c.Duration)
	case c.MaxError < 0:
		return c, fieldErr("MaxError", "%s %v: expected a positive duration", fielderr.Name("MaxError"), c.MaxError)
	case len(c.Streams) == 0 && len(c.Rates) == 0 && len(c.Bursts) == 0 && len(c.Burn) == 0 && len(c.ScrapePairs) == 0 && len(c.Saturated) == 0 && len(c.LivePairs) == 0:
		return c, fieldErr("Streams", "no step: give %s, %s, %s, %s, %s, %s or %s", fielderr.Name("Streams"), fielderr.Name("Rates"),
			fielderr.Name("Bursts"), fielderr.Name("Burn"), fielderr.Name("ScrapePairs"), fielderr.Name("LivePairs"), fielderr.Name("Saturated"))
	case c.Prefill < 0:
		return c, fieldErr("Prefill", "%s %v: expected a positive duration", fielderr.Name("Prefill"), c.Prefill)
	case c.ClientCPUs < 0:
		return c, fieldErr("ClientCPUs", "%s %d: expected a count of CPUs", fielderr.Name("ClientCPUs"), c.ClientCPUs)
	case c.ClientCPUs > 0 && c.Target == "" && c.Mode == ModeInProcess:
		return c, fieldErr("ClientCPUs", "%s needs the mock out of this process: not with %s %s", fielderr.Name("ClientCPUs"), fielderr.Name("Mode"), ModeInProcess)
	case c.BurstITL < time.Millisecond:
		return c, fieldErr("BurstITL", "%s %v: expected at least 1ms", fielderr.Name("BurstITL"), c.BurstITL)
	case c.Burners < 0:
		return c, fieldErr("Burners", "%s %d: expected a positive count", fielderr.Name("Burners"), c.Burners)
	case c.ScrapeInterval < 0:
		return c, fieldErr("ScrapeInterval", "%s %v: expected a positive duration", fielderr.Name("ScrapeInterval"), c.ScrapeInterval)
	case len(c.EventsPerS) > 1 && len(c.EventsPerS) != len(c.Streams):
		return c, fieldErr("EventsPerS", "%s has %d values for %d %s: expected one per step or a single value",
			fielderr.Name("EventsPerS"), len(c.EventsPerS), len(c.Streams), fielderr.Name("Streams"))
	case c.Mode != ModeProcess && c.Mode != ModeInProcess:
		return c, fieldErr("Mode", "%s %q: expected %s or %s", fielderr.Name("Mode"), c.Mode, ModeProcess, ModeInProcess)
	case c.Target == "" && c.Mode == ModeProcess && len(c.MockCommand) == 0:
		return c, fieldErr("MockCommand", "%s %s needs the tracekit executable (%s)", fielderr.Name("Mode"), ModeProcess, fielderr.Name("MockCommand"))
	case c.Target != "" && c.MockLog == "":
		return c, fieldErr("MockLog", "%s needs %s: the ground-truth log that mock writes (start it with --emit-log FILE)", fielderr.Name("Target"), fielderr.Name("MockLog"))
	}
	for _, l := range []struct {
		field string
		ns    []int
	}{{"Streams", c.Streams}, {"Bursts", c.Bursts}, {"Burn", c.Burn}, {"ScrapePairs", c.ScrapePairs}, {"Saturated", c.Saturated}, {"LivePairs", c.LivePairs}} {
		for i, n := range l.ns {
			if n < 1 {
				return c, fieldErr(l.field, "%s value %d (#%d): expected a positive count", fielderr.Name(l.field), n, i+1)
			}
		}
	}
	for i, m := range c.Stamps {
		if _, err := replay.ParseStampMode(m); err != nil {
			return c, fieldErr("Stamps", "%s value %q (#%d): %w", fielderr.Name("Stamps"), m, i+1, err)
		}
	}
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		if !trace.KnownEndpoint(e) {
			return c, fieldErr("Endpoints", "%s value %q (#%d): expected one of %s", fielderr.Name("Endpoints"), e, i+1, strings.Join(trace.Endpoints, ", "))
		}
		if seen[e] {
			return c, fieldErr("Endpoints", "%s value %q (#%d): given twice", fielderr.Name("Endpoints"), e, i+1)
		}
		seen[e] = true
	}
	for i, v := range c.EventsPerS {
		if !(v > 0) || math.IsInf(v, 0) {
			return c, fieldErr("EventsPerS", "%s value %g (#%d): expected a positive rate", fielderr.Name("EventsPerS"), v, i+1)
		}
	}
	for i, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			return c, fieldErr("Rates", "%s value %g (#%d): expected a positive request rate", fielderr.Name("Rates"), r, i+1)
		}
	}
	return c, nil
}

// fieldErr is a *fielderr.Error about the Config field field: the command
// line names the flag that set it instead.
func fieldErr(field, format string, args ...any) error {
	return fielderr.Errorf("calibrate.Config", field, format, args...)
}

// Ladder returns the steps of c in run order: the probe, the rate steps,
// the stream steps, each group by increasing load, then the burst steps,
// the burner steps, the saturated steps and the scrape pairs in the order
// given. With
// Endpoints, each step is repeated once per endpoint, and with Stamps each
// of those once per mode, back to back.
func (c Config) Ladder() []Step {
	steps := c.ladder()
	eps, modes := c.Endpoints, c.Stamps
	if len(eps) == 0 {
		eps = []string{""}
	}
	if len(modes) == 0 {
		modes = []string{""}
	}
	out := make([]Step, 0, len(steps)*len(eps)*len(modes))
	for _, s := range steps {
		for _, e := range eps {
			for _, m := range modes {
				s.Endpoint, s.Stamp = e, m
				out = append(out, s)
			}
		}
	}
	return out
}

// ladder is Ladder in one stamp mode.
func (c Config) ladder() []Step {
	steps := []Step{{Kind: KindProbe, Streams: ProbeStreams, EventsPerS: ProbeEventsPerS}}
	for _, r := range c.Rates {
		steps = append(steps, Step{Kind: KindRate, Rate: r})
	}
	for i, n := range c.Streams {
		eps := 4 * float64(n)
		switch {
		case len(c.EventsPerS) == 1:
			eps = c.EventsPerS[0]
		case len(c.EventsPerS) > 1:
			eps = c.EventsPerS[i]
		}
		steps = append(steps, Step{Kind: KindStreams, Streams: n, EventsPerS: eps})
	}
	for _, n := range c.Bursts {
		steps = append(steps, Step{Kind: KindBurst, Streams: n, EventsPerS: float64(n) / c.BurstITL.Seconds()})
	}
	for _, n := range c.Burn {
		steps = append(steps, Step{Kind: KindStreams, Streams: n, EventsPerS: 4 * float64(n), Burner: true})
	}
	for _, n := range c.Saturated {
		steps = append(steps, Step{Kind: KindSaturated, Streams: n, EventsPerS: float64(n) / SaturatedITL.Seconds()})
	}
	for _, n := range c.ScrapePairs {
		steps = append(steps, Step{Kind: KindStreams, Streams: n, EventsPerS: 4 * float64(n)},
			Step{Kind: KindStreams, Streams: n, EventsPerS: 4 * float64(n), Scrape: true})
	}
	for _, n := range c.LivePairs {
		steps = append(steps, Step{Kind: KindStreams, Streams: n, EventsPerS: 4 * float64(n), LiveView: "off"},
			Step{Kind: KindStreams, Streams: n, EventsPerS: 4 * float64(n), LiveView: "on"})
	}
	if c.Target != "" { // the remote mock's ITL decides the stream rate
		for i := range steps {
			if steps[i].Kind != KindRate {
				steps[i].EventsPerS = float64(steps[i].Streams) / c.TargetITL.Seconds()
			}
		}
	}
	return steps
}
