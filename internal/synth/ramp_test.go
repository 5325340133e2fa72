package synth

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
)

// rampStarts schedules n one-turn conversations with s and returns their
// starts in seconds.
func rampStarts(t *testing.T, s Schedule, n int) []float64 {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	convs := make([]Conversation, n)
	for i := range convs {
		convs[i] = Conversation{{Turn: 0}}
	}
	s.Apply(convs, 7)
	out := make([]float64, n)
	for i, c := range convs {
		out[i] = float64(c[0].StartOffsetNs) / 1e9
		if i > 0 && out[i] < out[i-1] {
			t.Fatalf("start %d at %g s before start %d at %g s", i, out[i], i-1, out[i-1])
		}
	}
	return out
}

// countBy is how many of starts are at or before t.
func countBy(starts []float64, t float64) int {
	n := 0
	for _, s := range starts {
		if s <= t {
			n++
		}
	}
	return n
}

// Nearly regular starts (burstiness 1e6) of a ramp over time: the count of
// starts by each second follows the ramp's cumulative rate, computed here
// from its formula, within one start.
func TestRampOverTimeFollowsTheRate(t *testing.T) {
	for _, c := range []struct {
		name   string
		s      Schedule
		lambda func(t float64) float64 // expected starts by t
		until  float64
	}{
		{"linear 1 to 50 over 60 s", Schedule{Rate: 50, Ramp: RampLinear, RampStart: 1, RampDuration: 60 * time.Second},
			func(t float64) float64 {
				if t <= 60 {
					return t + 49*t*t/120
				}
				return 1530 + 50*(t-60)
			}, 70},
		{"exponential 1 to 64 over 30 s", Schedule{Rate: 64, Ramp: RampExponential, RampStart: 1, RampDuration: 30 * time.Second},
			func(t float64) float64 {
				k := math.Log(64) / 30
				if t <= 30 {
					return (math.Exp(k*t) - 1) / k
				}
				return 63/k + 64*(t-30)
			}, 35},
		{"3 steps 10 to 30 over 30 s", Schedule{Rate: 30, Ramp: RampSteps, RampStart: 10, RampSteps: 3, RampDuration: 30 * time.Second},
			func(t float64) float64 {
				switch {
				case t <= 10:
					return 10 * t
				case t <= 20:
					return 100 + 20*(t-10)
				}
				return 300 + 30*(t-20)
			}, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.s.Burstiness = 1e6
			n := int(c.lambda(c.until))
			starts := rampStarts(t, c.s, n)
			for sec := 1.0; sec < c.until; sec++ {
				if got, want := float64(countBy(starts, sec)), c.lambda(sec); math.Abs(got-want) > 1.5 {
					t.Errorf("%g s: %g starts, want %.1f", sec, got, want)
				}
			}
		})
	}
}

// Poisson starts of a linear ramp: the starts in each 10-second window are
// the window's expected count within 4 standard deviations (sqrt of the
// count), with the seed fixed.
func TestRampPoissonWindows(t *testing.T) {
	s := Schedule{Rate: 50, Burstiness: 1, Ramp: RampLinear, RampStart: 1, RampDuration: 60 * time.Second}
	starts := rampStarts(t, s, 1530)
	lambda := func(t float64) float64 { return t + 49*t*t/120 }
	for from := 0.0; from < 60; from += 10 {
		got := float64(countBy(starts, from+10) - countBy(starts, from))
		want := lambda(from+10) - lambda(from)
		if math.Abs(got-want) > 4*math.Sqrt(want) {
			t.Errorf("[%g, %g) s: %g starts, want %.0f", from, from+10, got, want)
		}
	}
}

// Without a duration the ramp is over the conversations, as vLLM ramps
// over the request index: with regular gaps, start i is the sum of
// 1/rate(j/(n-1)) for j = 1..i (the first gap before start 0 only with
// VLLMSpan), and the starts are not rescaled.
func TestRampOverConversations(t *testing.T) {
	const n = 101
	for _, span := range []bool{false, true} {
		s := Schedule{Rate: 20, Burstiness: 1e6, Ramp: RampLinear, RampStart: 2, VLLMSpan: span}
		starts := rampStarts(t, s, n)
		at := 0.0
		for i := range n {
			if i > 0 || span {
				at += 1 / (2 + 18*float64(i)/float64(n-1))
			}
			if math.Abs(starts[i]-at) > 1e-3*at+1e-6 {
				t.Fatalf("span %v: start %d at %g s, want %g", span, i, starts[i], at)
			}
		}
	}
}

// Bad ramps are refused with the field named.
func TestRampRefused(t *testing.T) {
	for _, c := range []struct {
		s     Schedule
		field string
	}{
		{Schedule{Rate: 10, Ramp: "sawtooth", RampStart: 1}, "Ramp"},
		{Schedule{Rate: 0, Ramp: RampLinear, RampStart: 1}, "Rate"},
		{Schedule{Rate: 10, Ramp: RampExponential, RampStart: 0, RampDuration: time.Second}, "RampStart"},
		{Schedule{Rate: 10, Ramp: RampLinear, RampStart: 0}, "RampStart"},
		{Schedule{Rate: 10, Ramp: RampSteps, RampStart: 1, RampSteps: 1}, "RampSteps"},
		{Schedule{Rate: 10, RampStart: 1}, "Ramp"},
	} {
		if err := c.s.Validate(); err == nil || !containsField(err, c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.s, err, c.field)
		}
	}
}

// containsField reports whether err is a *fielderr.Error naming field.
func containsField(err error, field string) bool {
	var fe *fielderr.Error
	return errors.As(err, &fe) && fe.Field == field
}
