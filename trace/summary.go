package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// Stats summarises a sample: count, min, mean, percentiles, max.
type Stats struct {
	N                   int
	Min, Mean, P50, P90 float64
	P99, Max            float64
}

// NewStats computes Stats of xs (sorted in place); percentiles are numpy's
// linear ones (Percentile), as analyze's.
func NewStats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	sort.Float64s(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return Stats{N: len(xs), Min: xs[0], Mean: sum / float64(len(xs)), P50: Percentile(xs, 50), P90: Percentile(xs, 90),
		P99: Percentile(xs, 99), Max: xs[len(xs)-1]}
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
	return fmt.Sprintf("min %s  mean %.1f  p50 %s  p90 %s  p99 %s  max %s", num(st.Min), st.Mean, num(st.P50), num(st.P90), num(st.P99), num(st.Max))
}

// num prints a whole number as one, anything else with two decimals.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
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
	// TTFTms and E2ELms are over the successful requests (no error, HTTP
	// 200, at least one event), in ms from sent_ns, with analyze's default
	// definitions (first and last event; a non-streaming request has an
	// E2EL only), for a first look; analyze has the rest.
	TTFTms, E2ELms Stats
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
	var ttft, e2el []float64
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
			if n := len(rec.EventNs); n > 0 && rec.ErrorKind == ErrNone && rec.Status == 200 && !rec.Warmup {
				if !rec.NonStreaming {
					ttft = append(ttft, float64(rec.EventNs[0]-rec.SentNs)/1e6)
				}
				e2el = append(e2el, float64(rec.EventNs[n-1]-rec.SentNs)/1e6)
			}
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
	s.TTFTms, s.E2ELms = NewStats(ttft), NewStats(e2el)
	return s, nil
}
