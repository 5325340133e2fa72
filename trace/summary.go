package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"
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

// RateStats describes arrivals at a replay speed (times divided by it):
// their mean rate over the span between the first and last, and how bursty
// they are, three ways:
//
//   - Burstiness = mean(gap)^2 / var(gap), over the gaps between
//     consecutive arrivals: the shape of a gamma law with those two
//     moments, vLLM's --burstiness (1 Poisson, below 1 burstier, above 1
//     more regular). It does not depend on the speed.
//   - OwnDispersion: the index of dispersion (variance / mean) of the
//     counts per bin of OwnBinNs = 10 mean gaps, the trace's own time
//     scale (1 Poisson, above 1 bursty, below 1 regular); nor does it.
//   - Dispersion: the same per one-second bin of replay time, which is
//     what a server sees; it grows with the speed for bursty traffic.
//
// A dispersion needs at least two whole bins; it is 0 (unknown) otherwise.
type RateStats struct {
	Events        int
	Speed         float64
	SpanNs        int64 // at Speed
	PerSecond     float64
	Burstiness    float64
	OwnBinNs      int64
	OwnDispersion float64
	Dispersion    float64
}

func newRateStats(times []int64, speed float64) RateStats {
	if len(times) == 0 {
		return RateStats{}
	}
	if !(speed > 0) {
		speed = 1
	}
	ts := make([]int64, len(times))
	for i, t := range times {
		ts[i] = int64(math.Round(float64(t) / speed))
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	lo, hi := ts[0], ts[len(ts)-1]
	rs := RateStats{Events: len(ts), Speed: speed, SpanNs: hi - lo}
	if rs.SpanNs > 0 {
		rs.PerSecond = float64(len(ts)-1) / (float64(rs.SpanNs) / 1e9)
	}
	if len(ts) >= 3 {
		var sum, sum2 float64
		for i := 1; i < len(ts); i++ {
			g := float64(ts[i] - ts[i-1])
			sum += g
			sum2 += g * g
		}
		n := float64(len(ts) - 1)
		m := sum / n
		if v := sum2/n - m*m; v > 0 {
			rs.Burstiness = m * m / v
		}
		rs.OwnBinNs = int64(math.Round(10 * m))
	}
	rs.OwnDispersion = dispersion(ts, rs.OwnBinNs)
	rs.Dispersion = dispersion(ts, 1e9)
	return rs
}

// dispersion is the variance / mean of the counts of sorted times per bin
// of width ns, over whole bins only (the last, partial bin would bias the
// counts down); 0 with fewer than two whole bins.
func dispersion(ts []int64, width int64) float64 {
	if width <= 0 || len(ts) == 0 {
		return 0
	}
	lo := ts[0]
	full := (ts[len(ts)-1] - lo) / width
	if full < 2 {
		return 0
	}
	bins := make([]float64, full)
	for _, t := range ts {
		if b := (t - lo) / width; b < full {
			bins[b]++
		}
	}
	var sum, sum2 float64
	for _, c := range bins {
		sum += c
		sum2 += c * c
	}
	m := sum / float64(len(bins))
	if m == 0 {
		return 0
	}
	return (sum2/float64(len(bins)) - m*m) / m
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

// SummarizeTrace reads a trace once, keeping per-turn numbers only, with
// arrivals on the trace's own timeline (speed 1).
func SummarizeTrace(path string) (TraceSummary, error) { return SummarizeTraceAt(path, 1) }

// SummarizeTraceAt is SummarizeTrace with the arrival statistics of a
// replay at speed (start offsets divided by it, as replay --speed does).
func SummarizeTraceAt(path string, speed float64) (TraceSummary, error) {
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
	s.Starts, s.Arrivals = newRateStats(starts, speed), newRateStats(arrivals, speed)
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

// Durations formats a Stats of seconds as durations (FormatDuration).
func (st Stats) Durations() string {
	if st.N == 0 {
		return "none"
	}
	d := func(sec float64) string { return FormatDuration(int64(math.Round(sec * 1e9))) }
	return fmt.Sprintf("min %s  mean %s  p50 %s  p90 %s  p99 %s  max %s", d(st.Min), d(st.Mean), d(st.P50), d(st.P90), d(st.P99), d(st.Max))
}

// FormatDuration writes ns rounded to 4 significant digits, in Go's
// duration syntax ("893.8µs", "12.93ms", "6m59s").
func FormatDuration(ns int64) string {
	d := time.Duration(ns)
	abs := d.Abs()
	if abs < 10000 {
		return d.String()
	}
	unit := time.Duration(math.Pow10(int(math.Floor(math.Log10(float64(abs)))) - 3))
	return d.Round(unit).String()
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
				s.Errors[string(rec.ErrorKind)]++
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
