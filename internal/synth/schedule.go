package synth

import (
	"math"
	"math/rand/v2"
	"time"
)

// Schedule gives conversations their start offsets and every turn its
// open-loop arrival offset.
//
// Starts: conversation 0 starts at 0; the gap before each next one is
// drawn from a gamma distribution with shape Burstiness and scale
// 1/(Rate*Burstiness), vLLM's definition: the mean gap is 1/Rate whatever
// the burstiness, Burstiness 1 is a Poisson process (exponential gaps),
// below 1 is burstier and above 1 more regular. Rate 0 or +Inf starts
// every conversation at 0.
//
// Arrivals (used by replay's open-loop mode only; closed-loop replay waits
// for each response and then the think time): turn 0 arrives at the
// conversation's start; turn k arrives at
//
//	arrival(k-1) + TokenTime * output_tokens(k-1) + think(k)
//
// that is, after an estimate of the previous response's duration (a fixed
// time per output token) and the think time.
type Schedule struct {
	Rate       float64       // conversations per second
	Burstiness float64       // gamma shape; 0 means 1
	TokenTime  time.Duration // estimated time per output token for arrivals
	// VLLMSpan draws starts as vllm bench serve does (get_request in
	// vllm/benchmarks/serve.py, matched at vllm-project/vllm commit
	// 009e6d4a1cd6, where a fixed finite rate is rescaled): one gap per
	// conversation, the first before conversation 0, and the cumulative
	// sums scaled so that the last start lands exactly on N/Rate for N
	// conversations. Without it conversation 0 starts at 0 and the gaps
	// are left as drawn.
	VLLMSpan bool

	// Ramp, when set, makes the start rate change over the run from
	// RampStart to Rate (conversations per second). With RampDuration the
	// ramp is over time: the rate at time t is the ramp's at t/RampDuration
	// (Rate after it), and the starts are a gamma renewal process of mean
	// rate 1 mapped through the inverse of the cumulative rate (rampTime),
	// so the expected count of starts by t is exactly ∫₀ᵗ rate. Without it
	// the ramp is over the conversations, as vLLM's --ramp-up-strategy
	// ramps over the request index: conversation i's gap is drawn at the
	// rate of progress i/(N-1), and the starts are not rescaled.
	// RampSteps is the steps ramp's plateau count.
	Ramp         Ramp
	RampStart    float64
	RampDuration time.Duration
	RampSteps    int
}

// DefaultTokenTime is the response-time estimate per output token (50
// tokens/s, a typical single-stream decode speed).
const DefaultTokenTime = 20 * time.Millisecond

// Validate reports a bad rate, burstiness or token time as a *fielderr.Error.
func (s Schedule) Validate() error {
	if s.Rate < 0 || math.IsNaN(s.Rate) {
		return fieldErr("Schedule", "Rate", "rate %g must be >= 0 (0 or inf: all conversations at once)", s.Rate)
	}
	if s.Burstiness < 0 || math.IsNaN(s.Burstiness) || math.IsInf(s.Burstiness, 0) {
		return fieldErr("Schedule", "Burstiness", "burstiness %g must be positive", s.Burstiness)
	}
	if s.TokenTime < 0 {
		return fieldErr("Schedule", "TokenTime", "token time %v must not be negative", s.TokenTime)
	}
	return s.validateRamp()
}

// Apply sets the start and arrival offsets of convs, in order, drawing the
// gaps from a generator seeded with seed.
func (s Schedule) Apply(convs []Conversation, seed int64) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5c4ed))
	b := s.Burstiness
	if b == 0 {
		b = 1
	}
	if s.Ramp != RampNone {
		s.applyRamp(convs, func(rate float64) float64 { return Gamma{Shape: b, Scale: 1 / (rate * b)}.Sample(r) })
		return
	}
	gap := Gamma{Shape: b, Scale: 1 / (s.Rate * b)}
	allAtOnce := s.Rate == 0 || math.IsInf(s.Rate, 1)
	if s.VLLMSpan && !allAtOnce && len(convs) > 0 {
		at := make([]float64, len(convs))
		var sum float64
		for i := range at {
			sum += gap.Sample(r)
			at[i] = sum
		}
		scale := 1.0
		if sum > 0 {
			scale = float64(len(convs)) / s.Rate / sum
		}
		for i, c := range convs {
			SetArrivals(c, int64(math.Round(at[i]*scale*1e9)), s.TokenTime)
		}
		return
	}
	var start float64 // seconds
	for i, c := range convs {
		if i > 0 && !allAtOnce {
			start += gap.Sample(r)
		}
		SetArrivals(c, int64(math.Round(start*1e9)), s.TokenTime)
	}
}

// SetArrivals sets every turn's StartOffsetNs to startNs and its
// ArrivalOffsetNs by the rule in Schedule's doc.
func SetArrivals(c Conversation, startNs int64, tokenTime time.Duration) {
	at := startNs
	for k := range c {
		if k > 0 {
			at += int64(tokenTime)*int64(c[k-1].OutputTokens) + c[k].ThinkTimeNs
		}
		c[k].StartOffsetNs = startNs
		c[k].ArrivalOffsetNs = at
	}
}
