package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Stats summarises a sample: count, min, mean, percentiles, max.
type Stats struct {
	N                   int
	Min, Mean, P50, P90 float64
	P99, Max            float64
}

// NewStats computes Stats of xs (sorted in place).
func NewStats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	sort.Float64s(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	q := func(p float64) float64 { // nearest rank: the smallest x with at least p of the sample <= x
		return xs[max(0, min(len(xs)-1, int(math.Ceil(p*float64(len(xs))))-1))]
	}
	return Stats{N: len(xs), Min: xs[0], Mean: sum / float64(len(xs)), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: xs[len(xs)-1]}
}

// RateStats describes arrivals: their mean rate over the span between the
// first and last, and the index of dispersion (variance / mean) of the
// counts per one-second bin, 1 for a Poisson process, above 1 for bursty
// traffic, below 1 for regular traffic.
type RateStats struct {
	Events     int
	SpanNs     int64
	PerSecond  float64
	Dispersion float64
}

func newRateStats(times []int64) RateStats {
	if len(times) == 0 {
		return RateStats{}
	}
	lo, hi := times[0], times[0]
	for _, t := range times {
		lo, hi = min(lo, t), max(hi, t)
	}
	rs := RateStats{Events: len(times), SpanNs: hi - lo}
	if rs.SpanNs > 0 {
		rs.PerSecond = float64(len(times)-1) / (float64(rs.SpanNs) / 1e9)
	}
	// only whole seconds: the last, partial bin would bias the counts down
	if full := (hi - lo) / 1e9; full >= 2 {
		bins := make([]float64, full)
		for _, t := range times {
			if b := (t - lo) / 1e9; b < full {
				bins[b]++
			}
		}
		var sum, sum2 float64
		for _, c := range bins {
			sum += c
			sum2 += c * c
		}
		if m := sum / float64(len(bins)); m > 0 {
			rs.Dispersion = (sum2/float64(len(bins)) - m*m) / m
		}
	}
	return rs
}

// TraceSummary is what `tracekit inspect` prints for a trace: the shape of
// its conversations and of its arrivals (so a user can check that an
// import kept the source's burstiness).
type TraceSummary struct {
	Meta          TraceMeta
	Rows          int64
	Conversations int
	TurnsPerConv  Stats
	InputTokens   Stats // per turn, new messages only
	OutputTokens  Stats
	ThinkTimeSec  Stats // turns after the first
	WithReference int   // turns with a reference answer
	WithPrefix    int   // turns with prefix hashes
	Models        map[string]int
	Starts        RateStats // conversation starts
	Arrivals      RateStats // open-loop arrivals of all turns
	SpanNs        int64     // first start to last arrival
}

// SummarizeTrace reads a trace once, keeping per-turn numbers only.
func SummarizeTrace(path string) (TraceSummary, error) {
	r, err := OpenTrace(path)
	if err != nil {
		return TraceSummary{}, err
	}
	defer r.Close()
	s := TraceSummary{Meta: r.Meta, Rows: r.NumRows(), Models: map[string]int{}}
	var turns, in, out, think []float64
	var starts, arrivals []int64
	rows := make([]Turn, 512)
	lastConv, run := "", 0
	var lo, hi int64 = math.MaxInt64, math.MinInt64
	for {
		n, err := r.Read(rows)
		for _, t := range rows[:n] {
			if t.ConversationID != lastConv || run == 0 {
				if run > 0 {
					turns = append(turns, float64(run))
				}
				lastConv, run = t.ConversationID, 0
				starts = append(starts, t.StartOffsetNs)
			}
			run++
			in = append(in, float64(t.InputTokens))
			out = append(out, float64(t.OutputTokens))
			if t.Turn > 0 {
				think = append(think, float64(t.ThinkTimeNs)/1e9)
			}
			if t.ReferenceAnswer != "" {
				s.WithReference++
			}
			if len(t.PrefixHashes) > 0 {
				s.WithPrefix++
			}
			if t.Model != "" {
				s.Models[t.Model]++
			}
			arrivals = append(arrivals, t.ArrivalOffsetNs)
			lo, hi = min(lo, t.StartOffsetNs), max(hi, t.ArrivalOffsetNs)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s, err
		}
	}
	if run > 0 {
		turns = append(turns, float64(run))
	}
	s.Conversations = len(turns)
	s.TurnsPerConv, s.InputTokens, s.OutputTokens, s.ThinkTimeSec = NewStats(turns), NewStats(in), NewStats(out), NewStats(think)
	s.Starts, s.Arrivals = newRateStats(starts), newRateStats(arrivals)
	if hi >= lo {
		s.SpanNs = hi - lo
	}
	return s, nil
}

// String formats a Stats as "min .. mean .. max" with percentiles.
func (st Stats) String() string {
	if st.N == 0 {
		return "none"
	}
	return fmt.Sprintf("min %g  mean %.1f  p50 %g  p90 %g  p99 %g  max %g", st.Min, st.Mean, st.P50, st.P90, st.P99, st.Max)
}

// RecordingSummary is what `tracekit inspect` prints for a recording.
type RecordingSummary struct {
	Meta          RunMeta
	Rows          int64
	OK, Warmup    int
	Retries       int            // attempts after the first
	Errors        map[string]int // by error kind
	Events        int64
	Tokens        int64
	Conversations int
	SpanNs        int64 // first send to last completion, 0 if empty
}

// SummarizeRecording reads a recording once, keeping counts only.
func SummarizeRecording(path string) (RecordingSummary, error) {
	r, err := OpenRecording(path)
	if err != nil {
		return RecordingSummary{}, err
	}
	defer r.Close()
	s := RecordingSummary{Meta: r.Meta, Rows: r.NumRows(), Errors: map[string]int{}}
	convs := map[string]struct{}{}
	var first, last int64 = math.MaxInt64, math.MinInt64
	rows := make([]Record, 256)
	for {
		n, err := r.Read(rows)
		for _, rec := range rows[:n] {
			convs[rec.ConversationID] = struct{}{}
			if rec.ErrorKind == ErrNone {
				s.OK++
			} else {
				s.Errors[rec.ErrorKind]++
			}
			if rec.Warmup {
				s.Warmup++
			}
			if rec.Attempt > 0 {
				s.Retries++
			}
			s.Events += int64(len(rec.EventNs))
			for _, t := range rec.EventTokens {
				s.Tokens += int64(t)
			}
			first, last = min(first, rec.SentNs), max(last, rec.DoneNs)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s, err
		}
	}
	s.Conversations = len(convs)
	if last >= first {
		s.SpanNs = last - first
	}
	return s, nil
}
