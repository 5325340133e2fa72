package analyze

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// longRecords is a run with long streams (enough gaps for the radix
// selection, not only its small-input sort): multi-token and zero-token
// events, role-only first chunks, runs of one token each, failures and
// warm-up rows, times on a coarse grid half the time so events meet the
// 1 s bin edges exactly; mixed sends them to two endpoints at random.
func longRecords(r *rand.Rand, mixed bool) []trace.Record {
	grid := int64(1)
	if r.IntN(2) == 0 {
		grid = 1e8
	}
	g := func(x int64) int64 { return x / grid * grid }
	recs := make([]trace.Record, 20+r.IntN(60))
	for i := range recs {
		sent := g(r.Int64N(20e9))
		rec := trace.Record{RequestID: fmt.Sprint(i), IntendedNs: sent, SlotNs: sent, SentNs: sent, Status: 200,
			PromptTokens: 100, CompletionTokens: -1, CachedTokens: -1, Warmup: r.IntN(10) == 0, TokensExact: r.IntN(4) > 0}
		if r.IntN(8) == 0 {
			rec.Status = 503
		}
		if mixed {
			rec.Endpoint = []string{trace.EndpointChat, trace.EndpointCompletions}[r.IntN(2)]
		}
		t := sent + g(1e6+r.Int64N(1e9))
		ones := r.IntN(2) == 0 // every event after the first carries one token
		for e := range r.IntN(400) {
			tok := int32(1)
			if !ones && e > 0 {
				tok = int32(r.IntN(4)) // zero-token events hand their time on
			}
			if e == 0 && r.IntN(2) == 0 {
				tok = 0
			}
			rec.EventNs = append(rec.EventNs, t)
			rec.EventTokens = append(rec.EventTokens, tok)
			t += g(r.Int64N(3e7)) * int64(r.IntN(3))
		}
		rec.DoneNs = t
		recs[i] = rec
	}
	return recs
}

// exactStats is Dist.Stats' definition written plainly: a sorted copy,
// numpy's percentiles, the mean in sum's order and the two-pass variance.
func exactStats(xs []float64, ps []float64) (n int, mean, ss float64, pct []float64) {
	if len(xs) == 0 {
		return 0, 0, 0, make([]float64, len(ps))
	}
	mean = sum(xs) / float64(len(xs))
	for _, v := range xs {
		ss += (v - mean) * (v - mean)
	}
	sorted := slices.Sorted(slices.Values(xs))
	for _, p := range ps {
		pct = append(pct, Percentile(sorted, p))
	}
	return len(xs), mean, ss, pct
}

// TestPropertyPerEventFigures checks the figures built in the per-event
// pass against a plain per-event computation, to the bit: the 1 s token
// and message bins, the per-event, per-token and decode-only ITL, and the
// tokens per decode event.
func TestPropertyPerEventFigures(t *testing.T) {
	dir := t.TempDir()
	ps := []float64{1, 50, 90, 99}
	for seed := range 40 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		// Every fourth run mixes two endpoints: each has its own
		// per-event ITL, merged after, so the decode-only ITL cannot view
		// one of them and keeps its own copy.
		mixed := seed%4 == 3
		recs := longRecords(r, mixed)
		p := writeRecording(t, dir, fmt.Sprintf("e%d.parquet", seed), trace.RunMeta{}, recs)
		asStored(recs) // the reference below is computed from what the file holds
		s, err := Files([]string{p}, Options{Percentiles: ps})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var tok, msg []float64
		var perEvent, perToken, decode []float64
		counts := map[int32]int64{}
		k := 0
		for _, rec := range recs {
			if rec.Warmup {
				continue
			}
			q := s.Reqs[k]
			k++
			if !q.Success || q.NonStreaming {
				continue
			}
			carry, seen := int64(0), false
			for i, ts := range rec.EventNs {
				b := int(min(max(ts/1e9, 0), maxSeriesBins-1))
				for len(tok) <= b {
					tok, msg = append(tok, 0), append(msg, 0)
				}
				tok[b] += float64(rec.EventTokens[i])
				msg[b]++
				if n := rec.EventTokens[i]; n > 0 {
					if seen {
						counts[n]++
					}
					seen = true
				}
				if i == 0 {
					continue
				}
				gap := ts - rec.EventNs[i-1]
				perEvent = append(perEvent, float64(gap))
				if i >= 2 {
					decode = append(decode, float64(gap))
				}
				if n := rec.EventTokens[i]; n > 0 {
					perToken = append(perToken, float64(gap+carry)/float64(n))
					carry = 0
				} else {
					carry += gap
				}
			}
		}
		if k != len(s.Reqs) {
			t.Fatalf("seed %d: %d requests analyzed, want %d", seed, len(s.Reqs), k)
		}
		tag := fmt.Sprintf("seed %d", seed)
		for b := range max(len(tok), len(s.Series.OutputTokens)) {
			at := func(xs []float64) float64 {
				if b < len(xs) {
					return xs[b]
				}
				return 0
			}
			if at(s.Series.OutputTokens) != at(tok) || at(s.Series.Messages) != at(msg) {
				t.Fatalf("%s: bin %d holds %v tokens, %v messages; want %v, %v", tag, b,
					at(s.Series.OutputTokens), at(s.Series.Messages), at(tok), at(msg))
			}
		}
		checks := []struct {
			name string
			st   Stats
			xs   []float64
		}{{"decode ITL", s.Figures.DecodeITL, decode}}
		if !mixed { // else the run's ITL holds the endpoints' in turn
			checks = append(checks, struct {
				name string
				st   Stats
				xs   []float64
			}{"per-token ITL", s.ITLPerToken, perToken}, struct {
				name string
				st   Stats
				xs   []float64
			}{"per-event ITL", s.ITLPerEvent, perEvent})
		}
		for _, m := range checks {
			n, mean, ss, pct := exactStats(m.xs, ps)
			if m.st.Count != n || m.st.Mean != mean/1e6 || m.st.Std != stdMs(ss, n) {
				t.Fatalf("%s %s: count %d mean %v std %v, want %d %v %v", tag, m.name, m.st.Count, m.st.Mean, m.st.Std, n, mean/1e6, stdMs(ss, n))
			}
			for i, p := range m.st.Percentiles {
				if p.Value != pct[i]/1e6 {
					t.Fatalf("%s %s: p%v = %v, want %v", tag, m.name, p.P, p.Value, pct[i]/1e6)
				}
			}
		}
		var want []EventTokenCount
		for _, n := range slices.Sorted(maps.Keys(counts)) {
			want = append(want, EventTokenCount{Tokens: n, Events: counts[n]})
		}
		var got []EventTokenCount
		if s.TokensPerEvent != nil {
			got = s.TokensPerEvent.Counts
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: tokens per event %v, want %v", tag, got, want)
		}
	}
}

func stdMs(ss float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return math.Sqrt(ss/float64(n)) / 1e6
}

// TestDecodeITLPastExactLimit: with fewer exact samples allowed than the
// run's gaps, the decode-only ITL (a view of the per-event samples until
// then) passes to its histogram with every gap counted, its percentiles
// within HistRelErr of the exact ones.
func TestDecodeITLPastExactLimit(t *testing.T) {
	recs := longRecords(rand.New(rand.NewPCG(8, 8)), false)
	var decode []float64
	for _, rec := range recs {
		ok := !rec.Warmup && rec.Status == 200 && len(rec.EventNs) > 0
		for i := 2; ok && i < len(rec.EventNs); i++ {
			decode = append(decode, float64(rec.EventNs[i]-rec.EventNs[i-1]))
		}
	}
	p := writeRecording(t, t.TempDir(), "limit.parquet", trace.RunMeta{}, recs)
	s, err := Files([]string{p}, Options{Percentiles: []float64{50, 90}, MaxExactSamples: len(decode) / 3})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Figures.DecodeITL
	if !s.Approximate || st.Count != len(decode) {
		t.Fatalf("approximate %v, %d decode gaps counted, want %d", s.Approximate, st.Count, len(decode))
	}
	sorted := slices.Sorted(slices.Values(decode))
	for _, p := range st.Percentiles {
		want := Percentile(sorted, p.P) / 1e6
		if math.Abs(p.Value-want) > 2*HistRelErr*want {
			t.Errorf("p%v = %v ms, want %v within %v", p.P, p.Value, want, HistRelErr)
		}
	}
}

// TestWindowGapsViewedAsCopied: a window's ITL read in place from the
// run's per-event samples (spans found by binary search) equals the ITL of
// the gaps copied out event by event, the other figures too, for windows
// cut anywhere: on event times, between them, past the run.
func TestWindowGapsViewedAsCopied(t *testing.T) {
	dir := t.TempDir()
	ps := []float64{50, 90, 99}
	for seed := range 12 {
		r := rand.New(rand.NewPCG(uint64(seed), 13))
		recs := longRecords(r, false)
		p := writeRecording(t, dir, fmt.Sprintf("w%d.parquet", seed), trace.RunMeta{}, recs)
		s, err := Files([]string{p}, Options{Percentiles: ps})
		if err != nil {
			t.Fatal(err)
		}
		if !s.gapsIndexed() {
			t.Fatalf("seed %d: the gaps of a run of one endpoint are not indexed", seed)
		}
		var windows [][2]int64
		if s.Steady != nil {
			windows = append(windows, [2]int64{s.Steady.FromNs, s.Steady.ToNs})
		}
		for range 6 {
			from := s.StartNs + r.Int64N(s.EndNs-s.StartNs+1)
			if r.IntN(2) == 0 && len(s.eventTimes) > 0 { // on an event
				from = s.eventTimes[r.IntN(len(s.eventTimes))]
			}
			windows = append(windows, [2]int64{from, from + 1 + r.Int64N(3e10)})
		}
		for _, w := range windows {
			viewed := s.windowFigures(w[0], w[1], ps)
			saved := slices.Clone(s.Reqs)
			for i := range s.Reqs {
				s.Reqs[i].gapOff = -1 // as if not indexed: copied
			}
			copied := s.windowFigures(w[0], w[1], ps)
			s.Reqs = saved
			if !reflect.DeepEqual(viewed, copied) {
				t.Fatalf("seed %d window %v: viewed %+v\ncopied %+v", seed, w, viewed, copied)
			}
		}
	}
}

// TestMeanInFlightIsTheRunWindows: the text's mean in flight is the
// MeanInFlight of a window over the whole run.
func TestMeanInFlightIsTheRunWindows(t *testing.T) {
	for seed := range 8 {
		recs := longRecords(rand.New(rand.NewPCG(uint64(seed), 17)), seed%2 == 1)
		s := Records(recs, trace.RunMeta{}, Options{})
		if got, want := s.meanInFlight(), s.windowFigures(s.StartNs, s.EndNs, nil).MeanInFlight; got != want || got == 0 {
			t.Fatalf("seed %d: mean in flight %v, the run's window says %v", seed, got, want)
		}
	}
}
