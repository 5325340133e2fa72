package synth

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Unit says what a distribution's numbers measure.
type Unit int

const (
	// Count: token or turn counts, integers.
	Count Unit = iota
	// Seconds: durations; values take a Go duration suffix ("500ms", "2s",
	// "1m") or are plain seconds.
	Seconds
)

// DistSyntax documents ParseDist for --help.
const DistSyntax = `Distributions (token counts, turns, durations):
  N                 constant, e.g. 300 or 2s
  A-B               uniform over [A, B] (integers for counts), e.g. 200-400 or 1s-5s
  constant:value=N
  uniform:min=A,max=B
  zipf:alpha=A,max=N            P(k) ~ k^-alpha on 1..max (alpha > 1)
  poisson:alpha=L               mean L (also lambda=L)
  lognormal:average=M,median_ratio=R   mean M, median R*M (R default 0.85)
  lognormal:mean=MU,sigma=S     exp(MU + S*Z), numpy's parameters
  exponential:mean=M
  gamma:shape=K,scale=T         or gamma:shape=K,mean=M
Any of them takes min=A and max=B to clamp samples, e.g. lognormal:average=1000,max=5000.`

// ParseDist parses a distribution spec (see DistSyntax).
func ParseDist(spec string, unit Unit) (Dist, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("empty distribution")
	}
	name, args, hasArgs := strings.Cut(spec, ":")
	if !hasArgs {
		return parseShort(spec, unit)
	}
	kv := map[string]string{}
	for _, part := range strings.Split(args, ",") {
		if strings.TrimSpace(part) == "" && strings.TrimSpace(args) == "" {
			break // "name:" with no parameters
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q: parameter %q is not key=value", spec, part)
		}
		kv[strings.TrimSpace(strings.ToLower(k))] = strings.TrimSpace(v)
	}
	p := params{spec: spec, kv: kv, unit: unit}
	d, err := p.build(strings.ToLower(strings.TrimSpace(name)))
	if err != nil {
		return nil, err
	}
	if len(p.kv) > 0 {
		for k := range p.kv {
			return nil, fmt.Errorf("%q: unknown parameter %q for %s", spec, k, name)
		}
	}
	return d, nil
}

// parseShort handles "N" and "A-B".
func parseShort(spec string, unit Unit) (Dist, error) {
	if a, b, ok := strings.Cut(spec, "-"); ok && a != "" {
		lo, err := parseValue(a, unit)
		if err != nil {
			return nil, fmt.Errorf("%q: minimum: %w", spec, err)
		}
		hi, err := parseValue(b, unit)
		if err != nil {
			return nil, fmt.Errorf("%q: maximum: %w", spec, err)
		}
		return newUniform(spec, lo, hi, unit == Count)
	}
	v, err := parseValue(spec, unit)
	if err != nil {
		return nil, fmt.Errorf("%q: %w (want N, A-B or name:key=value,...)", spec, err)
	}
	return Constant{V: v}, nil
}

func newUniform(spec string, lo, hi float64, integer bool) (Dist, error) {
	if lo > hi {
		return nil, fmt.Errorf("%q: min %g > max %g", spec, lo, hi)
	}
	if integer && (lo != math.Trunc(lo) || hi != math.Trunc(hi)) {
		integer = false
	}
	return Uniform{Min: lo, Max: hi, Int: integer}, nil
}

// parseValue reads a non-negative number in unit.
func parseValue(s string, unit Unit) (float64, error) {
	s = strings.TrimSpace(s)
	if unit == Seconds && s != "" && strings.IndexFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r == 'µ' }) >= 0 {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: %w", s, err)
		}
		if d < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return d.Seconds(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return v, nil
}

// params consumes the key=value arguments of one spec; build fails on a
// missing key and ParseDist on a left-over one.
type params struct {
	spec string
	kv   map[string]string
	unit Unit
}

func (p *params) take(key string, unit Unit, def float64, required bool) (float64, bool, error) {
	s, ok := p.kv[key]
	if !ok {
		if required {
			return 0, false, fmt.Errorf("%q: missing parameter %s", p.spec, key)
		}
		return def, false, nil
	}
	delete(p.kv, key)
	v, err := parseValue(s, unit)
	if err != nil {
		return 0, true, fmt.Errorf("%q: parameter %s: %w", p.spec, key, err)
	}
	return v, true, nil
}

// raw reads a plain number (a shape, a ratio, a log-space mean).
func (p *params) raw(key string, def float64, required bool) (float64, bool, error) {
	return p.take(key, Count, def, required)
}

func (p *params) build(name string) (Dist, error) {
	var d Dist
	var err error
	switch name {
	case "constant":
		var v float64
		if v, _, err = p.take("value", p.unit, 0, true); err != nil {
			return nil, err
		}
		d = Constant{V: v}
	case "uniform":
		var lo, hi float64
		if lo, _, err = p.take("min", p.unit, 0, true); err != nil {
			return nil, err
		}
		if hi, _, err = p.take("max", p.unit, 0, true); err != nil {
			return nil, err
		}
		return newUniform(p.spec, lo, hi, p.unit == Count)
	case "zipf":
		var a, m float64
		if a, _, err = p.raw("alpha", 0, true); err != nil {
			return nil, err
		}
		if a <= 1 {
			return nil, fmt.Errorf("%q: zipf alpha %g must be > 1", p.spec, a)
		}
		if m, _, err = p.raw("max", 1e6, false); err != nil {
			return nil, err
		}
		if m < 1 {
			return nil, fmt.Errorf("%q: zipf max %g must be >= 1", p.spec, m)
		}
		d = Zipf{Alpha: a, Max: uint64(m)}
		return p.bounds(d, true)
	case "poisson":
		var l float64
		var ok bool
		if l, ok, err = p.raw("alpha", 0, false); err != nil {
			return nil, err
		}
		if !ok {
			if l, _, err = p.raw("lambda", 0, true); err != nil {
				return nil, err
			}
		}
		d = Poisson{Lambda: l}
	case "lognormal":
		avg, hasAvg, err := p.take("average", p.unit, 0, false)
		if err != nil {
			return nil, err
		}
		if hasAvg {
			ratio, _, err := p.raw("median_ratio", 0.85, false)
			if err != nil {
				return nil, err
			}
			ln, err := LognormalByAverage(avg, ratio)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", p.spec, err)
			}
			d = ln
			break
		}
		mu, err := p.signed("mean")
		if err != nil {
			return nil, err
		}
		sigma, _, err := p.raw("sigma", 0, true)
		if err != nil {
			return nil, err
		}
		d = Lognormal{Mu: mu, Sigma: sigma}
	case "exponential", "exp":
		var m float64
		if m, _, err = p.take("mean", p.unit, 0, true); err != nil {
			return nil, err
		}
		d = Exponential{M: m}
	case "gamma":
		var k, theta, mean float64
		var ok bool
		if k, _, err = p.raw("shape", 0, true); err != nil {
			return nil, err
		}
		if k <= 0 {
			return nil, fmt.Errorf("%q: gamma shape %g must be positive", p.spec, k)
		}
		if theta, ok, err = p.take("scale", p.unit, 0, false); err != nil {
			return nil, err
		}
		if !ok {
			if mean, _, err = p.take("mean", p.unit, 0, true); err != nil {
				return nil, fmt.Errorf("%w (or scale)", err)
			}
			theta = mean / k
		}
		d = Gamma{Shape: k, Scale: theta}
	default:
		return nil, fmt.Errorf("%q: unknown distribution %q (want constant, uniform, zipf, poisson, lognormal, exponential or gamma)", p.spec, name)
	}
	if err != nil {
		return nil, err
	}
	return p.bounds(d, false)
}

// signed reads a required number that may be negative (a log-space mean).
func (p *params) signed(key string) (float64, error) {
	s, ok := p.kv[key]
	if !ok {
		return 0, fmt.Errorf("%q: missing parameter %s (or average)", p.spec, key)
	}
	delete(p.kv, key)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: parameter %s: %q is not a number", p.spec, key, s)
	}
	return v, nil
}

// bounds applies optional min= and max= clamps. Zipf's max is part of the
// law itself, so only min applies to it.
func (p *params) bounds(d Dist, maxDone bool) (Dist, error) {
	lo, hasLo, err := p.take("min", p.unit, 0, false)
	if err != nil {
		return nil, err
	}
	var hi float64
	hasHi := false
	if !maxDone {
		if hi, hasHi, err = p.take("max", p.unit, 0, false); err != nil {
			return nil, err
		}
	}
	if !hasLo && !hasHi {
		return d, nil
	}
	if hasHi && lo > hi {
		return nil, fmt.Errorf("%q: min %g > max %g", p.spec, lo, hi)
	}
	if hasHi && hi == 0 {
		return Constant{V: 0}, nil
	}
	return Bounded{D: d, Min: lo, Max: hi}, nil
}
