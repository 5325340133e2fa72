package sweep

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Metrics an Objective may name.
const (
	MetricTTFT = "ttft"
	MetricTPOT = "tpot"
	MetricITL  = "itl"
	MetricE2EL = "e2el"
)

// Objective is one SLO term: the P-th percentile of Metric at most
// Threshold. See the package doc for how each metric is sampled.
type Objective struct {
	Metric    string        `json:"metric"`
	P         float64       `json:"p"`
	Threshold time.Duration `json:"threshold_ns"`
}

func (o Objective) String() string {
	return o.Metric + ":p" + strconv.FormatFloat(o.P, 'f', -1, 64) + ":" + o.Threshold.String()
}

// ThresholdMs is the threshold in milliseconds.
func (o Objective) ThresholdMs() float64 { return float64(o.Threshold) / 1e6 }

// SLO is a set of objectives, at most one per metric.
type SLO []Objective

func (s SLO) String() string {
	parts := make([]string, len(s))
	for i, o := range s {
		parts[i] = o.String()
	}
	return strings.Join(parts, " ")
}

// ParseSLO parses "ttft:p99:500ms tpot:p90:50ms": terms METRIC:pP:THRESHOLD
// separated by spaces or commas; THRESHOLD is a Go duration or a number of
// milliseconds.
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	seen := map[string]bool{}
	for _, term := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		parts := strings.Split(term, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("%q: expected METRIC:pPERCENTILE:THRESHOLD, e.g. ttft:p99:500ms", term)
		}
		m := strings.ToLower(parts[0])
		switch m {
		case MetricTTFT, MetricTPOT, MetricITL, MetricE2EL:
		default:
			return nil, fmt.Errorf("%q: unknown metric %q, expected ttft, tpot, itl or e2el", term, parts[0])
		}
		if seen[m] {
			return nil, fmt.Errorf("%q: %s is given twice", term, m)
		}
		seen[m] = true
		ps, ok := strings.CutPrefix(strings.ToLower(parts[1]), "p")
		p, err := strconv.ParseFloat(ps, 64)
		if !ok || err != nil || p <= 0 || p > 100 {
			return nil, fmt.Errorf("%q: percentile %q: expected p followed by a number in (0, 100], e.g. p99", term, parts[1])
		}
		th, err := parseThreshold(parts[2])
		if err != nil {
			return nil, fmt.Errorf("%q: threshold %q: %w", term, parts[2], err)
		}
		slo = append(slo, Objective{Metric: m, P: p, Threshold: th})
	}
	if len(slo) == 0 {
		return nil, fmt.Errorf("%q: no objective given, expected e.g. \"ttft:p99:500ms tpot:p90:50ms\"", s)
	}
	return slo, nil
}

func parseThreshold(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, err2 := strconv.ParseFloat(s, 64)
		if err2 != nil {
			return 0, fmt.Errorf("expected a duration such as 500ms or a number of milliseconds")
		}
		d = time.Duration(ms * 1e6)
	}
	if d <= 0 {
		return 0, fmt.Errorf("expected a positive duration")
	}
	return d, nil
}

// Criteria decide whether a step passes. The zero value of each limit is
// documented on its field.
type Criteria struct {
	SLO SLO `json:"slo,omitempty"`
	// GoodputTarget, when > 0, also requires that fraction of the measured
	// requests to be good (per-request goodput).
	GoodputTarget float64 `json:"goodput_target,omitempty"`
	// MaxErrorRate is the largest fraction of failed measured requests a
	// passing step may have (0: none may fail).
	MaxErrorRate float64 `json:"max_error_rate"`
	// MaxClientLag is the largest dispatch lag p99, Go scheduler latency
	// p99 or send delay p99 a step may show before it counts as distorted
	// by the client; 0 means DefaultMaxClientLag.
	MaxClientLag time.Duration `json:"max_client_lag_ns"`
	// MaxClientCPU is the largest share of the process's cores the client
	// may have used (CPU seconds / wall seconds / GOMAXPROCS) before the
	// step counts as distorted; 0 means DefaultMaxClientCPU.
	MaxClientCPU float64 `json:"max_client_cpu"`
}

// Defaults of Criteria: analyze warns at the same client lag, replay at
// the same CPU share.
const (
	DefaultMaxClientLag = 5 * time.Millisecond
	DefaultMaxClientCPU = 0.8
)

func (c Criteria) withDefaults() Criteria {
	if c.MaxClientLag <= 0 {
		c.MaxClientLag = DefaultMaxClientLag
	}
	if c.MaxClientCPU <= 0 {
		c.MaxClientCPU = DefaultMaxClientCPU
	}
	return c
}

// Validate reports the first invalid field.
func (c Criteria) Validate() error {
	switch {
	case c.GoodputTarget < 0 || c.GoodputTarget > 1:
		return fmt.Errorf("goodput target %g: expected a fraction in [0, 1]", c.GoodputTarget)
	case c.GoodputTarget > 0 && len(c.SLO) == 0:
		return fmt.Errorf("goodput target %g: needs an SLO to tell good requests", c.GoodputTarget)
	case c.MaxErrorRate < 0 || c.MaxErrorRate > 1:
		return fmt.Errorf("max error rate %g: expected a fraction in [0, 1]", c.MaxErrorRate)
	case c.MaxClientCPU < 0:
		return fmt.Errorf("max client CPU %g: expected a fraction of the cores", c.MaxClientCPU)
	}
	return nil
}

// Verdicts of a step.
const (
	VerdictPass        = "pass"
	VerdictFail        = "fail"
	VerdictDistorted   = "distorted"   // the client distorted it: never the answer
	VerdictInterrupted = "interrupted" // cut short by the user: neither pass nor fail
)

// Judge sets r's Distorted, Distortions, Checks[].Met, Pass, Verdict and
// Reasons from its measurements. A step passes when it ran to its end,
// some request succeeded, its error rate is at most MaxErrorRate, every
// objective's percentile is at most its threshold (the percentile form),
// its good fraction reaches GoodputTarget (when set) and the client did
// not distort it.
func (c Criteria) Judge(r *StepResult) {
	c = c.withDefaults()
	r.Reasons, r.Distortions = nil, nil
	lag := float64(c.MaxClientLag) / 1e6
	for _, h := range []struct {
		name string
		v    float64
	}{{"dispatch lag p99", r.DispatchLagP99Ms}, {"Go scheduler latency p99", r.SchedLatP99Ms}, {"send delay p99", r.SendDelayP99Ms}} {
		if h.v > lag {
			r.Distortions = append(r.Distortions, fmt.Sprintf("%s %.2f ms > %.2f ms", h.name, h.v, lag))
		}
	}
	if r.ClientCPU > c.MaxClientCPU {
		r.Distortions = append(r.Distortions, fmt.Sprintf("the client used %.0f%% of %d cores (> %.0f%%)", 100*r.ClientCPU, runtime.GOMAXPROCS(0), 100*c.MaxClientCPU))
	}
	r.Distorted = len(r.Distortions) > 0
	if r.Stopped != "" {
		r.Reasons = append(r.Reasons, "stopped early: "+r.Stopped)
	}
	if r.Completed == 0 {
		r.Reasons = append(r.Reasons, "no request succeeded")
	}
	if r.ErrorRate > c.MaxErrorRate {
		r.Reasons = append(r.Reasons, fmt.Sprintf("error rate %.2f%% > %.2f%%", 100*r.ErrorRate, 100*c.MaxErrorRate))
	}
	for i := range r.Checks {
		k := &r.Checks[i]
		k.Met = k.Samples > 0 && k.ValueMs <= k.ThresholdMs
		switch {
		case k.Samples == 0:
			r.Reasons = append(r.Reasons, fmt.Sprintf("%s: no samples", k.Name()))
		case !k.Met:
			r.Reasons = append(r.Reasons, fmt.Sprintf("%s %.2f ms > %.2f ms", k.Name(), k.ValueMs, k.ThresholdMs))
		}
	}
	if c.GoodputTarget > 0 && !(r.GoodFraction >= c.GoodputTarget) {
		r.Reasons = append(r.Reasons, fmt.Sprintf("goodput %.1f%% < %.1f%%", 100*r.GoodFraction, 100*c.GoodputTarget))
	}
	switch {
	case r.Interrupted:
		r.Verdict = VerdictInterrupted
	case r.Distorted:
		r.Verdict = VerdictDistorted
	case len(r.Reasons) > 0:
		r.Verdict = VerdictFail
	default:
		r.Verdict = VerdictPass
	}
	r.Pass = r.Verdict == VerdictPass
}

// Check is one objective measured on a step.
type Check struct {
	Metric      string  `json:"metric" parquet:"metric"`
	P           float64 `json:"p" parquet:"p"`
	ThresholdMs float64 `json:"threshold_ms" parquet:"threshold_ms"`
	ValueMs     float64 `json:"value_ms" parquet:"value_ms"` // the step's P-th percentile
	Samples     int     `json:"samples" parquet:"samples"`
	Met         bool    `json:"met" parquet:"met"`
}

// Name is "ttft p99".
func (k Check) Name() string { return k.Metric + " p" + strconv.FormatFloat(k.P, 'f', -1, 64) }

// certainFailCount is how many of at most n samples must exceed a
// threshold for the p-th percentile (numpy's linear method) to exceed it
// whatever the other samples are: with h = (n-1)p/100 the percentile lies
// between x[floor h] and x[floor h + 1], so once the top n - floor(h)
// samples exceed it, so does the percentile. It is non-decreasing in n, so
// a bound on the final count keeps it certain.
func certainFailCount(n int, p float64) int {
	if n <= 0 {
		return math.MaxInt
	}
	return n - int(math.Floor(float64(n-1)*p/100))
}
