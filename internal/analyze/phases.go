package analyze

import (
	"fmt"
	"math"
	"slices"
)

// Phases splits a run's time axis (seconds from the run start) into
// warm-up, steady state and drain, as the time charts mark them:
//   - drain starts at the last send: after it no request arrives and the
//     requests in flight only fall;
//   - warm-up ends at the first second whose time-averaged requests in
//     flight reach 90% of their median before the drain (the load has
//     built up).
//
// Steady is false when the run never reached that level before the drain
// (too short to say).
type Phases struct {
	WarmupEnd, DrainStart, End float64
	Steady                     bool
}

func (s *Summary) phases() Phases {
	var last int64 = -1
	for i := range s.Reqs {
		if q := &s.Reqs[i]; q.SentNs > 0 || q.Success {
			last = max(last, q.SentNs)
		}
	}
	c := s.Series.Concurrency
	ph := Phases{End: float64(len(c))}
	if s.EndNs > 0 {
		ph.End = float64(s.EndNs) / 1e9
	}
	if last < 0 || len(c) == 0 {
		return ph
	}
	ph.DrainStart = min(float64(last)/1e9, ph.End)
	before := c[:min(len(c), int(math.Ceil(ph.DrainStart)))]
	if len(before) == 0 {
		return ph
	}
	med := slices.Clone(before)
	slices.Sort(med)
	level := 0.9 * med[len(med)/2]
	for i, v := range before {
		if v >= level && level > 0 {
			ph.WarmupEnd, ph.Steady = float64(i), float64(i) < ph.DrainStart
			break
		}
	}
	return ph
}

// String is the phases as the page's note says them.
func (p Phases) String() string {
	if !p.Steady {
		return fmt.Sprintf("no steady state: the requests in flight never reached 90%% of their median before the last send at %.1f s", p.DrainStart)
	}
	warm := fmt.Sprintf("warm-up 0-%.1f s", p.WarmupEnd)
	if p.WarmupEnd == 0 {
		warm = "no warm-up (full load from the first second)"
	}
	return fmt.Sprintf("%s, steady state %.1f-%.1f s (requests in flight at 90%% of their median or more from then on), drain %.1f-%.1f s (after the last send)",
		warm, p.WarmupEnd, p.DrainStart, p.DrainStart, p.End)
}
