package analyze

import (
	"bufio"
	"fmt"
	"slices"
	"time"
)

// WindowFigures are the load and latency of one stretch of a run
// [FromNs, ToNs) (times from the aligned run start): a slice of
// --slices, or the steady window.
type WindowFigures struct {
	FromNs   int64   `json:"from_ns"`
	ToNs     int64   `json:"to_ns"`
	Duration float64 `json:"duration_s"`
	// OfferedRate is the requests the load intended to send in the window
	// (intended_ns in it) per second; Sent those actually sent in it.
	OfferedRate float64 `json:"offered_rate"`
	Sent        int     `json:"sent"`
	// Completed counts the successful requests that ended in the window;
	// RequestThroughput is Completed per second.
	Completed         int     `json:"completed"`
	RequestThroughput float64 `json:"request_throughput"`
	// OutputThroughput is the output tokens that arrived in the window per
	// second: each successful request's tokens in proportion to its
	// events in the window (the body's time for a non-streaming one).
	OutputThroughput float64 `json:"output_throughput"`
	// MeanInFlight is the time-average of successful requests in flight
	// (start to start + E2EL) over the window.
	MeanInFlight float64 `json:"mean_in_flight"`
	// TTFT is of the successful streams sent in the window; ITL the
	// per-event gaps that ended in it (each request's mean gap when the run
	// was too large to keep its events).
	TTFT Stats `json:"ttft"`
	ITL  Stats `json:"itl"`
}

// windowFigures computes the figures of [from, to).
func (s *Summary) windowFigures(from, to int64, ps []float64) WindowFigures {
	w := WindowFigures{FromNs: from, ToNs: to, Duration: float64(to-from) / 1e9}
	in := func(t int64) bool { return t >= from && t < to }
	limit := s.Options.MaxExactSamples
	ttft, itl := newDist(limit), newDist(limit)
	// The window's gaps are, request by request, a span of the run's
	// per-event ITL samples (its sorted events' gaps ending in the window,
	// found by binary search): viewed there rather than copied, when every
	// stream's gaps are there.
	all := s.dists["itl"]
	var spans []span
	viewed := s.eventTimes != nil && all.hist == nil && all.view == nil && !all.sorted && s.gapsIndexed()
	if n, span := len(s.eventTimes), s.EndNs-s.StartNs; !viewed && n > 0 && span > 0 {
		// Room for the window's share of the events, half as many again
		// (a steady window is where the events crowd), so its gaps do not
		// copy the samples as they grow.
		itl.samples = make([]float64, 0, min(n, int(float64(n)*1.5*float64(to-from)/float64(span))+1024))
	}
	var tokens, busy float64
	offered, gaps := 0, 0
	for i := range s.Reqs {
		q := &s.Reqs[i]
		if in(q.IntendedNs) {
			offered++
		}
		if in(q.SentNs) {
			w.Sent++
		}
		if !q.Success {
			continue
		}
		end := q.StartNs + q.E2ELNs
		if in(end) {
			w.Completed++
		}
		busy += float64(max(0, min(end, to)-max(q.StartNs, from)))
		if q.NonStreaming {
			if in(q.LastNs) {
				tokens += float64(q.OutputTokens)
			}
			continue
		}
		if in(q.SentNs) {
			ttft.Add(float64(q.TTFTNs))
		}
		if s.eventTimes != nil && q.Events > 0 {
			ev := s.eventTimes[q.evOff : q.evOff+int(q.Events)]
			var k int
			if viewed {
				lo, _ := slices.BinarySearch(ev, from) // the first event at or after from
				hi, _ := slices.BinarySearch(ev, to)
				k = hi - lo
				if a := max(lo, 1); a < hi { // gap j ends at event j
					spans = append(spans, span{q.gapOff + a - 1, q.gapOff + hi - 1})
					gaps += hi - a
				}
			} else {
				k = itl.addGapsIn(ev, from, to)
			}
			tokens += float64(q.OutputTokens) * float64(k) / float64(len(ev))
			continue
		}
		// No event times: spread the tokens evenly from first to last event.
		switch {
		case q.LastNs > q.FirstNs:
			tokens += float64(q.OutputTokens) * float64(max(0, min(q.LastNs, to)-max(q.FirstNs, from))) / float64(q.LastNs-q.FirstNs)
		case in(q.FirstNs):
			tokens += float64(q.OutputTokens)
		}
		if in(q.FirstNs) && q.OutputTokens > 1 {
			itl.Add(q.ITLMeanNs)
		}
	}
	switch {
	case gaps > limit: // past the exact samples: added one by one, into the histogram
		for _, sp := range spans {
			for _, v := range all.samples[sp.from:sp.to] {
				itl.Add(v)
			}
		}
	case gaps > 0:
		itl.view = &sampleView{of: all, spans: spans, n: gaps}
	}
	if w.Duration > 0 {
		w.OfferedRate = float64(offered) / w.Duration
		w.RequestThroughput = float64(w.Completed) / w.Duration
		w.OutputThroughput = tokens / w.Duration
		w.MeanInFlight = busy / float64(to-from)
	}
	w.TTFT, w.ITL = ttft.Stats(ps), itl.Stats(ps)
	return w
}

// gapsIndexed reports whether every successful stream's gaps are in the
// run's per-event ITL samples where its gapOff says.
func (s *Summary) gapsIndexed() bool {
	for i := range s.Reqs {
		if q := &s.Reqs[i]; q.Success && !q.NonStreaming && q.Events > 0 && q.gapOff < 0 {
			return false
		}
	}
	return true
}

// slices sets Summary.Slices: the run cut into Options.Slices-long
// windows from its start to its end.
func (s *Summary) slices() {
	d := int64(s.Options.Slices)
	if d <= 0 {
		return
	}
	ps := slices.Sorted(slices.Values(append([]float64{50, 99}, s.Options.Percentiles...)))
	ps = slices.Compact(ps)
	for from := s.StartNs; from < s.EndNs; from += d {
		s.Slices = append(s.Slices, s.windowFigures(from, from+d, ps))
	}
}

// writeSlices prints the slices' table.
func (s *Summary) writeSlices(b *bufio.Writer) {
	if len(s.Slices) == 0 {
		return
	}
	fmt.Fprintln(b, center("Load slices ("+time.Duration(s.Options.Slices).String()+")", '-', 50))
	fmt.Fprintf(b, "%-15s %9s %9s %9s %9s %9s %9s %9s %9s\n", "slice", "offered/s", "req/s", "tok/s", "in-flight",
		"TTFT p50", "TTFT p99", "ITL p50", "ITL p99")
	for _, w := range s.Slices {
		fmt.Fprintf(b, "%-15s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", seconds(w.FromNs)+"-"+seconds(w.ToNs),
			w.OfferedRate, w.RequestThroughput, w.OutputThroughput, w.MeanInFlight,
			pctOf(w.TTFT, 50), pctOf(w.TTFT, 99), pctOf(w.ITL, 50), pctOf(w.ITL, 99))
	}
	fmt.Fprintln(b, "(TTFT of requests sent in the slice, ITL of gaps ending in it, in ms)")
}

// pctOf is the p-th percentile of st (slices compute 50 and 99 beside the
// run's percentiles).
func pctOf(st Stats, p float64) float64 {
	for _, x := range st.Percentiles {
		if x.P == p {
			return x.Value
		}
	}
	return 0
}
