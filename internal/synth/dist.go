package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Dist is a distribution of non-negative numbers: token counts, turn
// counts, or durations in seconds. Sample draws with the caller's
// generator, so a seed fixes every draw.
type Dist interface {
	Sample(r *rand.Rand) float64
	// Mean is the expected value of Sample (for a Bounded distribution,
	// of the unbounded one).
	Mean() float64
	String() string
}

var (
	_ Dist = Constant{}
	_ Dist = Uniform{}
	_ Dist = Zipf{}
	_ Dist = Poisson{}
	_ Dist = Lognormal{}
	_ Dist = Exponential{}
	_ Dist = Gamma{}
	_ Dist = Bounded{}
	_ Dist = UserTurns{}
)

// Constant always returns V.
type Constant struct{ V float64 }

func (d Constant) Sample(*rand.Rand) float64 { return d.V }
func (d Constant) Mean() float64             { return d.V }
func (d Constant) String() string            { return fmt.Sprintf("constant(%g)", d.V) }

// Uniform draws from [Min, Max]. With Int it draws an integer, each of
// Min..Max with probability 1/(Max-Min+1): mean (Min+Max)/2, variance
// ((Max-Min+1)^2-1)/12. Otherwise it draws a real number: mean (Min+Max)/2,
// variance (Max-Min)^2/12.
type Uniform struct {
	Min, Max float64
	Int      bool
}

func (d Uniform) Sample(r *rand.Rand) float64 {
	if d.Int {
		return d.Min + float64(r.Int64N(int64(d.Max-d.Min)+1))
	}
	return d.Min + r.Float64()*(d.Max-d.Min)
}
func (d Uniform) Mean() float64 { return (d.Min + d.Max) / 2 }
func (d Uniform) String() string {
	if d.Int {
		return fmt.Sprintf("uniform(%g..%g)", d.Min, d.Max)
	}
	return fmt.Sprintf("uniform(%g, %g)", d.Min, d.Max)
}

// Zipf draws k in 1..Max with P(k) = k^-Alpha / H(Max, Alpha), where
// H(n, a) = sum_{j=1..n} j^-a; Alpha > 1. Its mean is
// H(Max, Alpha-1) / H(Max, Alpha). (numpy's zipf, which vLLM uses, draws
// from the same law unbounded and then clamps to max; with a Max here the
// tail is renormalised instead of piled up on Max.)
type Zipf struct {
	Alpha float64
	Max   uint64
}

func (d Zipf) Sample(r *rand.Rand) float64 {
	return float64(rand.NewZipf(r, d.Alpha, 1, d.Max-1).Uint64() + 1)
}
func (d Zipf) Mean() float64 {
	var num, den float64
	for k := d.Max; k >= 1; k-- { // small terms first for accuracy
		p := math.Pow(float64(k), -d.Alpha)
		num += float64(k) * p
		den += p
	}
	return num / den
}
func (d Zipf) String() string { return fmt.Sprintf("zipf(alpha=%g, max=%d)", d.Alpha, d.Max) }

// Poisson draws k >= 0 with P(k) = Lambda^k e^-Lambda / k!: mean and
// variance Lambda. (vLLM calls Lambda "alpha".) Small Lambda uses Knuth's
// product of uniforms; Lambda >= 10 uses Hormann's transformed rejection
// (PTRS), the method numpy uses.
type Poisson struct{ Lambda float64 }

func (d Poisson) Sample(r *rand.Rand) float64 {
	if d.Lambda <= 0 {
		return 0
	}
	if d.Lambda < 10 {
		l, k, p := math.Exp(-d.Lambda), 0, 1.0
		for {
			p *= r.Float64()
			if p <= l {
				return float64(k)
			}
			k++
		}
	}
	lam := d.Lambda
	slam, loglam := math.Sqrt(lam), math.Log(lam)
	b := 0.931 + 2.53*slam
	a := -0.059 + 0.02483*b
	invAlpha := 1.1239 + 1.1328/(b-3.4)
	vr := 0.9277 - 3.6224/(b-2)
	for {
		u := r.Float64() - 0.5
		v := r.Float64()
		us := 0.5 - math.Abs(u)
		k := math.Floor((2*a/us+b)*u + lam + 0.43)
		if us >= 0.07 && v <= vr {
			return k
		}
		if k < 0 || (us < 0.013 && v > us) {
			continue
		}
		lg, _ := math.Lgamma(k + 1)
		if math.Log(v)+math.Log(invAlpha)-math.Log(a/(us*us)+b) <= -lam+k*loglam-lg {
			return k
		}
	}
}
func (d Poisson) Mean() float64  { return d.Lambda }
func (d Poisson) String() string { return fmt.Sprintf("poisson(%g)", d.Lambda) }

// Lognormal draws exp(Mu + Sigma*Z), Z standard normal: median e^Mu, mean
// e^(Mu + Sigma^2/2), variance (e^(Sigma^2) - 1) e^(2Mu + Sigma^2).
type Lognormal struct{ Mu, Sigma float64 }

// LognormalByAverage is vLLM's parameterisation: the mean is average and the
// median is medianRatio times it (0 < medianRatio < 1), so
// Sigma = sqrt(2 ln(1/medianRatio)) and Mu = ln(average*medianRatio).
// (vLLM additionally rescales each batch of samples to the exact average;
// tracekit draws independently, so the average holds in expectation.)
func LognormalByAverage(average, medianRatio float64) (Lognormal, error) {
	if average <= 0 {
		return Lognormal{}, fmt.Errorf("lognormal average %g must be positive", average)
	}
	if medianRatio <= 0 || medianRatio >= 1 {
		return Lognormal{}, fmt.Errorf("lognormal median_ratio %g must be in (0, 1)", medianRatio)
	}
	return Lognormal{Mu: math.Log(average * medianRatio), Sigma: math.Sqrt(2 * math.Log(1/medianRatio))}, nil
}

func (d Lognormal) Sample(r *rand.Rand) float64 { return math.Exp(d.Mu + d.Sigma*r.NormFloat64()) }
func (d Lognormal) Mean() float64               { return math.Exp(d.Mu + d.Sigma*d.Sigma/2) }
func (d Lognormal) String() string {
	return fmt.Sprintf("lognormal(mu=%g, sigma=%g; mean %g)", d.Mu, d.Sigma, d.Mean())
}

// Exponential draws with density e^(-x/M)/M: mean M, variance M^2.
type Exponential struct{ M float64 }

func (d Exponential) Sample(r *rand.Rand) float64 { return r.ExpFloat64() * d.M }
func (d Exponential) Mean() float64               { return d.M }
func (d Exponential) String() string              { return fmt.Sprintf("exponential(mean=%g)", d.M) }

// Gamma draws with density x^(k-1) e^(-x/theta) / (Gamma(k) theta^k) for
// shape k = Shape and scale theta = Scale: mean k*theta, variance
// k*theta^2. Shape 1 is the exponential. Sampling is Marsaglia and Tsang's
// squeeze method; shape < 1 boosts from shape+1 by U^(1/k).
type Gamma struct{ Shape, Scale float64 }

func (d Gamma) Sample(r *rand.Rand) float64 { return gammaSample(r, d.Shape) * d.Scale }
func (d Gamma) Mean() float64               { return d.Shape * d.Scale }
func (d Gamma) String() string              { return fmt.Sprintf("gamma(shape=%g, scale=%g)", d.Shape, d.Scale) }

func gammaSample(r *rand.Rand, k float64) float64 {
	if k < 1 {
		return gammaSample(r, k+1) * math.Pow(r.Float64(), 1/k)
	}
	dd := k - 1.0/3
	c := 1 / math.Sqrt(9*dd)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+dd*(1-v+math.Log(v)) {
			return dd * v
		}
	}
}

// Bounded clamps D's samples to [Min, Max] (Max 0 means no upper bound),
// like vLLM's "max" field.
type Bounded struct {
	D        Dist
	Min, Max float64
}

func (d Bounded) Sample(r *rand.Rand) float64 {
	x := max(d.D.Sample(r), d.Min)
	if d.Max > 0 {
		x = min(x, d.Max)
	}
	return x
}
func (d Bounded) Mean() float64 { return d.D.Mean() }
func (d Bounded) String() string {
	s := d.D.String()
	if d.Min > 0 {
		s += fmt.Sprintf(" min %g", d.Min)
	}
	if d.Max > 0 {
		s += fmt.Sprintf(" max %g", d.Max)
	}
	return s
}

// UserTurns converts a distribution of vLLM's num_turns (user and
// assistant messages together) into user turns the way vLLM does: round
// the sample, raise it to at least 2, round it up to even, halve it. So
// num_turns 30-40 gives 15-20 user turns.
type UserTurns struct{ Messages Dist }

func (d UserTurns) Sample(r *rand.Rand) float64 {
	m := max(math.Round(d.Messages.Sample(r)), 2)
	return math.Ceil(m / 2)
}
func (d UserTurns) Mean() float64  { return math.Ceil(max(d.Messages.Mean(), 2) / 2) }
func (d UserTurns) String() string { return "user turns of " + d.Messages.String() }

// sampleInt draws from d and rounds to an integer in [0, maxTokens] (the
// upper clamp only catches the far tail of an unbounded law: a trace
// stores counts as int32).
func sampleInt(d Dist, r *rand.Rand) int {
	return int(min(max(math.Round(d.Sample(r)), 0), maxTokens))
}
