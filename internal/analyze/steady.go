package analyze

import (
	"bufio"
	"fmt"
	"math"
	"slices"
)

// SteadyRatio is the share of the peak in-flight count the steady window
// keeps to (SteadyState).
const SteadyRatio = 0.8

// SteadyState is the steady window of a run and its figures. The rule is
// SGLang's steady-state benchmark's (sglang.benchmark.steady_state,
// --steady-state-concurrency-ratio): count the successful requests in
// flight over time (each from its start to start + E2EL, as vLLM's peak
// concurrency does), take the peak, and keep the longest continuous
// interval in which at least ceil(SteadyRatio x peak) are in flight (the
// first of equally long ones). The ramp-up (in flight still growing), the
// drain (the last requests finishing) and any dip of the load between them
// fall outside; with a constant arrival rate or concurrency the window is
// the plateau where the in-flight count and the arrival rate are stable.
type SteadyState struct {
	Ratio        float64 `json:"concurrency_ratio"`
	PeakInFlight int     `json:"peak_in_flight"`
	// MinInFlight is the threshold, ceil(Ratio x PeakInFlight): the window
	// never has fewer in flight.
	MinInFlight int `json:"min_in_flight"`
	// Figures are the window's, as a slice's (WindowFigures).
	WindowFigures
}

// Window returns the steady window as a --window selection (requests
// sent in it).
func (st *SteadyState) Window() Window {
	return Window{FromNs: st.FromNs, ToNs: st.ToNs, text: "steady", steady: true}
}

// steadyWindow finds the steady window of the successful requests in reqs;
// ok is false when none has a positive E2EL.
func steadyWindow(reqs []Request, ratio float64) (from, to int64, peak, threshold int, ok bool) {
	type change struct {
		t int64
		d int
	}
	var ch []change
	for i := range reqs {
		q := &reqs[i]
		if !q.Success || q.E2ELNs <= 0 {
			continue
		}
		ch = append(ch, change{q.StartNs, 1}, change{q.StartNs + q.E2ELNs, -1})
	}
	if len(ch) == 0 {
		return 0, 0, 0, 0, false
	}
	slices.SortFunc(ch, func(a, b change) int { return int(a.t - b.t) })
	// Intervals [t_i, t_i+1) of constant in-flight count.
	type span struct {
		from, to int64
		n        int
	}
	var spans []span
	n := 0
	for i := 0; i < len(ch); {
		t := ch[i].t
		for ; i < len(ch) && ch[i].t == t; i++ {
			n += ch[i].d
		}
		if i < len(ch) {
			spans = append(spans, span{t, ch[i].t, n})
			peak = max(peak, n)
		}
	}
	threshold = max(1, int(math.Ceil(float64(peak)*ratio-1e-9)))
	runFrom, best := int64(-1), int64(-1)
	for i, sp := range spans {
		if sp.n < threshold {
			runFrom = -1
			continue
		}
		if runFrom < 0 || spans[i-1].to != sp.from {
			runFrom = sp.from
		}
		if sp.to-runFrom > best {
			best, from, to = sp.to-runFrom, runFrom, sp.to
		}
	}
	return from, to, peak, threshold, best > 0
}

// steady sets Summary.Steady.
func (s *Summary) steady() {
	from, to, peak, threshold, ok := steadyWindow(s.Reqs, SteadyRatio)
	if !ok {
		return
	}
	s.Steady = &SteadyState{Ratio: SteadyRatio, PeakInFlight: peak, MinInFlight: threshold, WindowFigures: s.windowFigures(from, to, s.Options.Percentiles)}
}

// writeSteady prints the steady window beside the whole run's figures.
func (s *Summary) writeSteady(b *bufio.Writer) {
	st := s.Steady
	if st == nil {
		return
	}
	fmt.Fprintln(b, center("Steady state", '-', 50))
	fmt.Fprintf(b, "%-40s %s-%s (%.2f s; >= %d of the peak %d in flight, ratio %.2f)\n", "Steady window:",
		seconds(st.FromNs), seconds(st.ToNs), st.Duration, st.MinInFlight, st.PeakInFlight, st.Ratio)
	fmt.Fprintf(b, "%-40s %12s %12s\n", "", "steady", "whole run")
	row := func(label string, steady, whole float64) {
		fmt.Fprintf(b, "%-40s %12.2f %12.2f\n", label, steady, whole)
	}
	row("Request throughput (req/s):", st.RequestThroughput, s.RequestThroughput)
	row("Output token throughput (tok/s):", st.OutputThroughput, s.OutputThroughput)
	row("Mean in flight:", st.MeanInFlight, s.meanInFlight())
	// Labels unlike vLLM block's rows, which scripts read by label.
	row("TTFT median (ms):", st.TTFT.Median, s.TTFT.Median)
	row("ITL median (ms, per event):", st.ITL.Median, s.ITLPerEvent.Median)
	for i, p := range st.TTFT.Percentiles {
		row("TTFT p"+pWord(p.P)+" (ms):", p.Value, s.TTFT.Percentiles[i].Value)
	}
	for i, p := range st.ITL.Percentiles {
		row("ITL p"+pWord(p.P)+" (ms, per event):", p.Value, s.ITLPerEvent.Percentiles[i].Value)
	}
	fmt.Fprintln(b, "(--window steady analyzes the requests sent in the window)")
}

// meanInFlight is the whole run's mean in-flight count: windowFigures'
// MeanInFlight over the run, without the window's latency statistics.
func (s *Summary) meanInFlight() float64 {
	from, to := s.StartNs, s.EndNs
	if to <= from {
		return 0
	}
	var busy float64
	for i := range s.Reqs {
		if q := &s.Reqs[i]; q.Success {
			busy += float64(max(0, min(q.StartNs+q.E2ELNs, to)-max(q.StartNs, from)))
		}
	}
	return busy / float64(to-from)
}

// steadyPass analyzes with --window steady: a first pass over the whole run
// finds the window, a second analyzes the requests sent in it. run does one
// pass with the options given.
func steadyPass(opts Options, run func(Options) (*Summary, error)) (*Summary, error) {
	whole := opts
	whole.Window = Window{}
	s, err := run(whole)
	if err != nil || s.Steady == nil {
		if err == nil {
			err = fmt.Errorf("--window steady: no successful request to find the steady window from: %w", ErrBadInput)
		}
		return nil, err
	}
	opts.Window = s.Steady.Window()
	st := s.Steady
	s, err = run(opts)
	if err != nil {
		return nil, err
	}
	s.Steady = st // the window found over the whole run, not within itself
	return s, nil
}
