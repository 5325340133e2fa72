package sweep

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Axis is the dimension a sweep varies.
type Axis string

// The load axes.
const (
	// AxisSpeed is the time scale of the trace (replay's Speed): 2 sends the
	// captured traffic twice as fast.
	AxisSpeed Axis = "speed"
	// AxisRate is conversation starts per second. A rate R is run as speed
	// R / TraceRate (see the package doc).
	AxisRate Axis = "rate"
	// AxisConcurrency is closed-loop capacity: C virtual users, at most C
	// conversations active and C requests in flight.
	AxisConcurrency Axis = "max-concurrency"
)

// ParseAxis parses an axis name.
func ParseAxis(s string) (Axis, error) {
	switch a := Axis(s); a {
	case AxisSpeed, AxisRate, AxisConcurrency:
		return a, nil
	}
	return "", fmt.Errorf("axis %q: expected speed, rate or max-concurrency", s)
}

// Integer reports whether the axis takes whole numbers only.
func (a Axis) Integer() bool { return a == AxisConcurrency }

// Load is one step's load: a value on an axis.
type Load struct {
	Axis  Axis    `json:"axis"`
	Value float64 `json:"value"`
}

// String is the load for people: "speed 2x", "rate 12.5/s",
// "max-concurrency 8".
func (l Load) String() string {
	v := FormatValue(l.Value)
	switch l.Axis {
	case AxisSpeed:
		return "speed " + v + "x"
	case AxisRate:
		return "rate " + v + "/s"
	}
	return string(l.Axis) + " " + v
}

// Name is the load in a file name: "speed-2", "rate-12.5".
func (l Load) Name() string { return string(l.Axis) + "-" + FormatValue(l.Value) }

// FormatValue prints a load value with up to 4 significant digits and no
// exponent for everyday magnitudes.
func FormatValue(v float64) string {
	return strconv.FormatFloat(roundSig(v, 4), 'f', -1, 64)
}

// roundSig rounds v to n significant digits.
func roundSig(v float64, n int) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// Plan says which loads a sweep runs: an explicit Ladder, or a Search.
type Plan struct {
	Axis   Axis        `json:"axis"`
	Ladder []float64   `json:"ladder,omitempty"` // ascending, distinct
	Search *SearchSpec `json:"search,omitempty"`
}

// SearchSpec bounds a search. The search starts at Start, doubles while
// steps pass (never above Max) and halves while they fail (never below
// Min), then bisects (geometric mean) the bracket [highest pass, lowest
// fail] until hi/lo - 1 <= Resolution (on an integer axis also when hi - lo
// <= 1).
type SearchSpec struct {
	Start      float64 `json:"start"`
	Min        float64 `json:"min"`
	Max        float64 `json:"max"`
	Resolution float64 `json:"resolution"`
	// MaxSteps bounds the number of steps; 0 means DefaultMaxSteps.
	MaxSteps int `json:"max_steps"`
}

// DefaultMaxSteps bounds a search that is given no MaxSteps.
const DefaultMaxSteps = 30

// DefaultResolution is the search's default stopping ratio (5%).
const DefaultResolution = 0.05

// Validate reports the first inconsistent field of p.
func (p Plan) Validate() error {
	if _, err := ParseAxis(string(p.Axis)); err != nil {
		return err
	}
	switch {
	case p.Search == nil && len(p.Ladder) == 0:
		return fmt.Errorf("%s: no load given", p.Axis)
	case p.Search != nil && len(p.Ladder) > 0:
		return fmt.Errorf("%s: a ladder and a search at once", p.Axis)
	}
	for _, v := range p.Ladder {
		if err := checkValue(p.Axis, v); err != nil {
			return err
		}
	}
	if s := p.Search; s != nil {
		for _, v := range []float64{s.Start, s.Min, s.Max} {
			if err := checkValue(p.Axis, v); err != nil {
				return err
			}
		}
		if !(s.Min <= s.Start && s.Start <= s.Max) {
			return fmt.Errorf("%s search: expected min %s <= start %s <= max %s", p.Axis, FormatValue(s.Min), FormatValue(s.Start), FormatValue(s.Max))
		}
		if !(s.Resolution > 0 && s.Resolution < 1) {
			return fmt.Errorf("resolution %g: expected a fraction in (0, 1), e.g. 0.05 for 5%%", s.Resolution)
		}
		if s.MaxSteps < 0 {
			return fmt.Errorf("max steps %d: expected 0 (default) or more", s.MaxSteps)
		}
	}
	return nil
}

func checkValue(a Axis, v float64) error {
	if !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("%s %g: expected a positive number", a, v)
	}
	if a.Integer() && v != math.Trunc(v) {
		return fmt.Errorf("%s %g: expected a whole number", a, v)
	}
	return nil
}

// ParseValues parses an axis flag's value: a list ("0.5,1,2,4"), "search"
// (search with the axis' default range) or "search:LO-HI". A list comes
// back sorted and without duplicates; search says whether a search was
// asked, with lo and hi 0 when no range was given.
func ParseValues(a Axis, s string) (ladder []float64, search bool, lo, hi float64, err error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "search"); ok {
		if rest == "" {
			return nil, true, 0, 0, nil
		}
		r, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return nil, false, 0, 0, fmt.Errorf("%q: expected a list such as 0.5,1,2,4, search, or search:LO-HI", s)
		}
		lo, hi, err = ParseRange(a, r)
		return nil, true, lo, hi, err
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "x"))
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, false, 0, 0, fmt.Errorf("%q: %q is not a number (expected a list such as 0.5,1,2,4, or search)", s, f)
		}
		if err := checkValue(a, v); err != nil {
			return nil, false, 0, 0, err
		}
		ladder = append(ladder, v)
	}
	if len(ladder) == 0 {
		return nil, false, 0, 0, fmt.Errorf("%q: no value given", s)
	}
	slices.Sort(ladder)
	return slices.Compact(ladder), false, 0, 0, nil
}

// ParseRange parses "LO-HI" (e.g. "0.25-16"), lo < hi.
func ParseRange(a Axis, s string) (lo, hi float64, err error) {
	l, h, ok := strings.Cut(s, "-")
	if ok {
		lo, err = strconv.ParseFloat(strings.TrimSpace(l), 64)
	}
	if ok && err == nil {
		hi, err = strconv.ParseFloat(strings.TrimSpace(h), 64)
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("range %q: expected LO-HI, e.g. 0.25-16", s)
	}
	for _, v := range []float64{lo, hi} {
		if err := checkValue(a, v); err != nil {
			return 0, 0, err
		}
	}
	if lo >= hi {
		return 0, 0, fmt.Errorf("range %q: expected LO < HI", s)
	}
	return lo, hi, nil
}

// ParseSearch parses "AXIS:LO-HI" (e.g. "speed:0.25-16") or "AXIS".
func ParseSearch(s string) (Axis, float64, float64, error) {
	name, r, hasRange := strings.Cut(s, ":")
	a, err := ParseAxis(strings.TrimSpace(name))
	if err != nil {
		return "", 0, 0, err
	}
	if !hasRange {
		return a, 0, 0, nil
	}
	lo, hi, err := ParseRange(a, r)
	return a, lo, hi, err
}

// ParseResolution parses "5%" or "0.05".
func ParseResolution(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err == nil && pct {
		v /= 100
	}
	if err != nil || !(v > 0 && v < 1) {
		return 0, fmt.Errorf("%q: expected a fraction such as 5%% or 0.05 (between 0 and 1)", s)
	}
	return v, nil
}
