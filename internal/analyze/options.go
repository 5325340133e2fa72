package analyze

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/trace"
)

// fieldErr is a *fielderr.Error about the Options field field: the
// command line names the flag that set it instead.
func fieldErr(field, format string, args ...any) error {
	return fielderr.Errorf("analyze.Options", field, format, args...)
}

// ITLMode selects the definition of inter-token latency used for the
// headline ITL figures.
type ITLMode int

const (
	// ITLPerEvent is vLLM bench serve's: one sample per event gap, pooled.
	ITLPerEvent ITLMode = iota
	// ITLPerToken is NVIDIA GenAI-Perf's: each gap divided by the tokens
	// of the later event, one sample per event.
	ITLPerToken
	// ITLRequestMean is NVIDIA AIPerf's (0.8, GenAI-Perf's successor):
	// (request latency - TTFT) / (output_len - 1) = (last event - first
	// event) / (output_len - 1), one sample per request with output_len > 1.
	ITLRequestMean
	// ITLFirstContent is guidellm's: the same mean from the first to the
	// last event that carried content tokens (a role-only first chunk does
	// not start it), (last content - first content) / (output_len - 1).
	ITLFirstContent
)

var itlModeNames = [...]string{"per-event", "per-token", "request-mean", "first-content"}

// itlLabels name each definition with the tool that uses it.
var itlLabels = [...]string{"per-event gap (vLLM bench serve)", "per-token gap/tokens (GenAI-Perf)",
	"request mean (AIPerf 0.8)", "first-content mean (guidellm)"}

func (m ITLMode) String() string {
	if int(m) < len(itlModeNames) {
		return itlModeNames[m]
	}
	return fmt.Sprintf("ITLMode(%d)", int(m))
}

// ParseITLMode parses per-event, per-token, request-mean or first-content.
func ParseITLMode(s string) (ITLMode, error) {
	for i, n := range itlModeNames {
		if s == n {
			return ITLMode(i), nil
		}
	}
	return 0, fieldErr("ITL", "%s %q: expected per-event, per-token, request-mean or first-content", fielderr.Name("ITL"), s)
}

// SuccessRule decides which requests count as completed.
type SuccessRule int

const (
	// SuccessVLLM is vLLM bench serve's rule: HTTP 200, at least one event
	// with choices, and no exception in its client; a stream that ended
	// cleanly without data: [DONE] is a success.
	SuccessVLLM SuccessRule = iota
	// SuccessStrict also requires data: [DONE] (and takes any 2xx).
	SuccessStrict
)

var successNames = [...]string{"vllm", "strict"}

func (r SuccessRule) String() string {
	if int(r) < len(successNames) {
		return successNames[r]
	}
	return fmt.Sprintf("SuccessRule(%d)", int(r))
}

// ParseSuccessRule parses vllm or strict.
func ParseSuccessRule(s string) (SuccessRule, error) {
	for i, n := range successNames {
		if s == n {
			return SuccessRule(i), nil
		}
	}
	return 0, fieldErr("Success", "%s %q: expected vllm or strict", fielderr.Name("Success"), s)
}

// StartMode is the start a request's latencies are measured from.
type StartMode int

const (
	// StartSent is sent_ns: when replay's write of the request's bytes
	// completed (the body built, the connection set up).
	StartSent StartMode = iota
	// StartSlot is slot_ns: when the request got its concurrency slot,
	// before its body was built and sent: the stamp closest to vLLM's st
	// (time.perf_counter() taken just before its client builds and posts
	// the request).
	StartSlot
)

var startNames = [...]string{"sent", "slot"}

func (m StartMode) String() string {
	if int(m) < len(startNames) {
		return startNames[m]
	}
	return fmt.Sprintf("StartMode(%d)", int(m))
}

// of returns a record's start under m.
func (m StartMode) of(r *trace.Record) int64 {
	if m == StartSlot {
		return r.SlotNs
	}
	return r.SentNs
}

// ParseStartMode parses sent or slot.
func ParseStartMode(s string) (StartMode, error) {
	for i, n := range startNames {
		if s == n {
			return StartMode(i), nil
		}
	}
	return 0, fieldErr("Start", "%s %q: expected sent or slot", fielderr.Name("Start"), s)
}

// Metric names accepted by Options.Metrics, in vLLM's print order.
var allMetrics = []string{"ttft", "tpot", "itl", "e2el"}

// Window selects requests by send time, relative to the (aligned) run start:
// From <= SentNs < To. To == 0 means no upper bound.
type Window struct {
	FromNs, ToNs int64
	text         string // as given to ParseWindow, for messages
	// steady: "steady", the run's steady window (SteadyState), found by a
	// first pass over the run (steadyPass) that sets FromNs and ToNs.
	steady bool
}

// IsZero reports whether the window selects everything.
func (w Window) IsZero() bool { return w.FromNs == 0 && w.ToNs == 0 && !w.steady }

// SteadyWindow is the window "steady": the run's steady window.
func SteadyWindow() Window { return Window{text: "steady", steady: true} }

// IsSteady reports whether w is the steady window (found or still to find).
func (w Window) IsSteady() bool { return w.steady }

func (w Window) contains(ns int64) bool {
	return ns >= w.FromNs && (w.ToNs == 0 || ns < w.ToNs)
}

func (w Window) String() string {
	if w.IsZero() {
		return ""
	}
	to := ""
	if w.ToNs != 0 {
		to = time.Duration(w.ToNs).String()
	}
	if w.steady {
		if w.ToNs == 0 {
			return "steady"
		}
		return "steady " + time.Duration(w.FromNs).String() + "-" + to
	}
	return time.Duration(w.FromNs).String() + "-" + to
}

// flag is the window as the user wrote it, for messages.
func (w Window) flag() string {
	if w.text != "" {
		return w.text
	}
	return w.String()
}

// ParseWindow parses "FROM-TO" of Go durations ("60s-300s", "1m-5m"), with
// TO optional ("60s-"), or "steady" (SteadyWindow).
func ParseWindow(s string) (Window, error) {
	if s == "" {
		return Window{}, nil
	}
	if s == "steady" {
		return SteadyWindow(), nil
	}
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return Window{}, fieldErr("Window", "%s %q: expected FROM-TO, e.g. 60s-300s, or steady", fielderr.Name("Window"), s)
	}
	f, err := time.ParseDuration(from)
	if err != nil {
		return Window{}, fieldErr("Window", "%s %q: start: %w", fielderr.Name("Window"), s, err)
	}
	w := Window{FromNs: int64(f), text: s}
	if to != "" {
		t, err := time.ParseDuration(to)
		if err != nil {
			return Window{}, fieldErr("Window", "%s %q: end: %w", fielderr.Name("Window"), s, err)
		}
		if t <= f {
			return Window{}, fieldErr("Window", "%s %q: end must be after start", fielderr.Name("Window"), s)
		}
		w.ToNs = int64(t)
	}
	if w.FromNs < 0 {
		return Window{}, fieldErr("Window", "%s %q: start must not be negative", fielderr.Name("Window"), s)
	}
	return w, nil
}

// SLO is vLLM's goodput configuration: a request is good when every set
// limit holds (value <= limit). Nil means not set; 0 is a limit (as in
// vLLM, which accepts any non-negative value: only a value <= 0 meets it).
type SLO struct {
	TTFTms *float64 `json:"ttft,omitempty"`
	TPOTms *float64 `json:"tpot,omitempty"`
	E2ELms *float64 `json:"e2el,omitempty"`
}

// Limit returns ms as an SLO limit.
func Limit(ms float64) *float64 { return &ms }

// IsZero reports whether no SLO is set.
func (s SLO) IsZero() bool { return s.TTFTms == nil && s.TPOTms == nil && s.E2ELms == nil }

// ParseGoodput parses vLLM's "KEY:MS" pairs (ttft, tpot, e2el), each item
// possibly holding several pairs separated by spaces or commas.
func ParseGoodput(items []string) (SLO, error) {
	var slo SLO
	for _, item := range items {
		for _, kv := range strings.FieldsFunc(item, func(r rune) bool { return r == ' ' || r == ',' }) {
			k, v, ok := strings.Cut(kv, ":")
			if !ok {
				return SLO{}, fieldErr("Goodput", "%s %q: expected KEY:MS (ttft, tpot or e2el)", fielderr.Name("Goodput"), kv)
			}
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil || ms < 0 || math.IsInf(ms, 0) || math.IsNaN(ms) {
				return SLO{}, fieldErr("Goodput", "%s %q: %q is not a non-negative number of milliseconds", fielderr.Name("Goodput"), kv, v)
			}
			switch k {
			case "ttft":
				slo.TTFTms = Limit(ms)
			case "tpot":
				slo.TPOTms = Limit(ms)
			case "e2el":
				slo.E2ELms = Limit(ms)
			default:
				return SLO{}, fieldErr("Goodput", "%s %q: unknown metric %q, expected ttft, tpot or e2el", fielderr.Name("Goodput"), kv, k)
			}
		}
	}
	return slo, nil
}

// ParsePercentiles parses "50,90,99" (vLLM's --metric-percentiles).
func ParsePercentiles(s string) ([]float64, error) {
	var ps []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || p < 0 || p > 100 {
			return nil, fieldErr("Percentiles", "%s %q: %q is not a number in [0, 100]", fielderr.Name("Percentiles"), s, f)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fieldErr("Percentiles", "%s %q: no percentile given", fielderr.Name("Percentiles"), s)
	}
	return ps, nil
}

// ParseMetrics parses "ttft,tpot,itl,e2el" (vLLM's --percentile-metrics).
func ParseMetrics(s string) ([]string, error) {
	var ms []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ok := false
		for _, m := range allMetrics {
			ok = ok || m == f
		}
		if !ok {
			return nil, fieldErr("Metrics", "%s %q: unknown metric %q, expected ttft, tpot, itl or e2el", fielderr.Name("Metrics"), s, f)
		}
		ms = append(ms, f)
	}
	return ms, nil
}

// Options select what is analyzed and how. The zero value gives vLLM's
// defaults: warm-up excluded, whole run, per-event ITL, P99 of ttft, tpot,
// itl.
type Options struct {
	Window        Window
	IncludeWarmup bool
	Goodput       SLO
	Percentiles   []float64 // default [99]
	Metrics       []string  // default ttft, tpot, itl
	ITL           ITLMode
	Success       SuccessRule
	Start         StartMode
	// MaxExactSamples bounds each distribution before it switches to a
	// histogram; 0 means DefaultMaxExactSamples.
	MaxExactSamples int
	// Slices, when above 0, cuts the run into windows that long from its
	// start (Summary.Slices).
	Slices time.Duration
	// ServerMetrics is a telemetry sidecar to report (server.go); "" finds each recording's own.
	ServerMetrics string
}

func (o Options) withDefaults() Options {
	if len(o.Percentiles) == 0 {
		o.Percentiles = []float64{99}
	}
	if len(o.Metrics) == 0 {
		o.Metrics = []string{"ttft", "tpot", "itl"}
	}
	if o.MaxExactSamples <= 0 {
		o.MaxExactSamples = DefaultMaxExactSamples
	}
	return o
}

func (o Options) hasMetric(m string) bool {
	for _, x := range o.Metrics {
		if x == m {
			return true
		}
	}
	return false
}
