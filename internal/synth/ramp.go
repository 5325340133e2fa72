package synth

import "math"

// Ramp is how Schedule's rate changes over a run: from RampStart to Rate.
type Ramp string

// The ramps.
const (
	RampNone        Ramp = ""
	RampLinear      Ramp = "linear"      // the rate grows by the same amount each second (or each conversation)
	RampExponential Ramp = "exponential" // the rate grows by the same factor each second (or each conversation)
	RampSteps       Ramp = "steps"       // RampSteps equal plateaus from RampStart to Rate
)

// rampRate is the rate at progress p in [0, 1] of the ramp.
func (s Schedule) rampRate(p float64) float64 {
	r0, r1 := s.RampStart, s.Rate
	p = min(max(p, 0), 1)
	switch s.Ramp {
	case RampExponential:
		return r0 * math.Pow(r1/r0, p)
	case RampSteps:
		n := max(s.RampSteps, 2)
		i := min(math.Floor(p*float64(n)), float64(n-1))
		return r0 + (r1-r0)*i/float64(n-1)
	}
	return r0 + (r1-r0)*p
}

// rampTime is the time t (seconds) at which the ramp's expected arrival
// count, Λ(t) = ∫₀ᵗ rate, reaches u: the inverse of the cumulative rate,
// so arrivals at operational times u₁ < u₂ < ... of a process of mean rate
// 1 are arrivals of the ramped process (the time-rescaling theorem). Past
// RampDuration the rate stays Rate.
//
//	linear:      rate(t) = r0 + a·t,          a = (r1-r0)/T,  Λ(t) = r0·t + a·t²/2
//	exponential: rate(t) = r0·e^(k·t),        k = ln(r1/r0)/T, Λ(t) = r0·(e^(k·t)-1)/k
//	steps:       rate constant on each of n plateaus of T/n seconds
func (s Schedule) rampTime(u float64) float64 {
	T := s.RampDuration.Seconds()
	r0, r1 := s.RampStart, s.Rate
	var lambdaT float64 // Λ(T)
	switch s.Ramp {
	case RampExponential:
		k := math.Log(r1/r0) / T
		if k == 0 {
			lambdaT = r0 * T
			if u <= lambdaT {
				return u / r0
			}
			break
		}
		if lambdaT = r0 * (math.Exp(k*T) - 1) / k; u <= lambdaT {
			return math.Log1p(k*u/r0) / k
		}
	case RampSteps:
		n := max(s.RampSteps, 2)
		w := T / float64(n)
		t := 0.0
		for i := range n {
			r := r0 + (r1-r0)*float64(i)/float64(n-1)
			if r*w >= u {
				return t + u/r
			}
			u -= r * w
			t += w
		}
		return T + u/r1
	default:
		a := (r1 - r0) / T
		if lambdaT = (r0 + r1) * T / 2; u <= lambdaT {
			if a == 0 {
				return u / r0
			}
			return (math.Sqrt(r0*r0+2*a*u) - r0) / a
		}
	}
	return T + (u-lambdaT)/r1
}

// validateRamp checks the ramp fields.
func (s Schedule) validateRamp() error {
	switch s.Ramp {
	case RampNone:
		if s.RampStart != 0 || s.RampDuration != 0 || s.RampSteps != 0 {
			return fieldErr("Schedule", "Ramp", "a ramp's start, duration or steps without a ramp")
		}
		return nil
	case RampLinear, RampExponential, RampSteps:
	default:
		return fieldErr("Schedule", "Ramp", "%q: want %s, %s or %s", s.Ramp, RampLinear, RampExponential, RampSteps)
	}
	if !(s.Rate > 0) || math.IsInf(s.Rate, 1) {
		return fieldErr("Schedule", "Rate", "a ramp ends at a finite rate above 0, not %g", s.Rate)
	}
	if !(s.RampStart >= 0) || math.IsInf(s.RampStart, 1) || (s.Ramp != RampLinear && s.RampStart == 0) {
		return fieldErr("Schedule", "RampStart", "%g: want a finite start rate above 0 (a linear ramp may start at 0)", s.RampStart)
	}
	if s.RampStart == 0 && s.RampDuration == 0 {
		return fieldErr("Schedule", "RampStart", "a ramp over the conversations starts above 0")
	}
	if s.RampDuration < 0 {
		return fieldErr("Schedule", "RampDuration", "%v must not be negative", s.RampDuration)
	}
	if s.Ramp == RampSteps && s.RampSteps < 2 {
		return fieldErr("Schedule", "RampSteps", "%d: a ramp of steps has at least 2", s.RampSteps)
	}
	if s.Ramp != RampSteps && s.RampSteps != 0 {
		return fieldErr("Schedule", "RampSteps", "steps are for the steps ramp")
	}
	return nil
}

// applyRamp sets the starts of a ramped schedule (see Schedule).
func (s Schedule) applyRamp(convs []Conversation, gap func(rate float64) float64) {
	n := len(convs)
	at := 0.0
	for i, c := range convs {
		if s.RampDuration > 0 {
			// operational time: gaps of mean 1, mapped through Λ⁻¹
			if i > 0 || s.VLLMSpan {
				at += gap(1)
			}
			SetArrivals(c, int64(math.Round(s.rampTime(at)*1e9)), s.TokenTime)
			continue
		}
		// by conversation, as vLLM ramps by request index: conversation
		// i's gap is drawn at the rate of progress i/(n-1), the first one
		// before conversation 0 under VLLMSpan, none otherwise; no rescale
		if i > 0 || s.VLLMSpan {
			at += gap(s.rampRate(float64(i) / float64(max(n-1, 1))))
		}
		SetArrivals(c, int64(math.Round(at*1e9)), s.TokenTime)
	}
}
