package analyze

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// randomRecords builds a random run: warm-up rows, failures of every
// kind, role-only first chunks, multi-token events, one-token outputs,
// missing usage, empty event lists.
func randomRecords(r *rand.Rand) []trace.Record {
	n := 1 + r.IntN(60)
	recs := make([]trace.Record, n)
	// On a coarse grid, starts meet ends and events meet bin edges exactly.
	grid := int64(1)
	if r.IntN(2) == 0 {
		grid = 1e8
	}
	g := func(x int64) int64 { return x / grid * grid }
	for i := range recs {
		intended := g(r.Int64N(20e9))
		slot := intended + g(r.Int64N(2e8))
		sent := slot + g(r.Int64N(5e6))
		rec := trace.Record{RequestID: fmt.Sprint(i), Turn: int32(r.IntN(5)), Warmup: r.IntN(8) == 0,
			IntendedNs: intended, SlotNs: slot, SentNs: sent, Status: 200,
			PromptTokens: int32(r.IntN(3000)) - 1, InputTokens: int32(r.IntN(3000)),
			CompletionTokens: -1, CachedTokens: int32(r.IntN(500)) - 100}
		if rec.CachedTokens < 0 {
			rec.CachedTokens = -1
		}
		t := sent + g(1e6+r.Int64N(3e9))
		ne := r.IntN(20)
		var total int32
		for e := range ne {
			tok := int32(1 + r.IntN(4))
			if e == 0 && r.IntN(2) == 0 {
				tok = 0 // role-only first chunk
			}
			rec.EventNs = append(rec.EventNs, t)
			rec.EventTokens = append(rec.EventTokens, tok)
			total += tok
			t += g(r.Int64N(2e8)) * int64(r.IntN(3)) // sometimes equal stamps
		}
		if r.IntN(3) > 0 {
			rec.CompletionTokens = total + int32(r.IntN(2))
		}
		switch r.IntN(10) {
		case 0:
			rec.Status = 503
		case 1:
			rec.ErrorKind = trace.ErrStreamTruncated
		}
		rec.DoneNs = t + r.Int64N(1e6)
		recs[i] = rec
	}
	return recs
}

// naive is the reference: vLLM's calculate_metrics transcribed literally,
// in float seconds, over the non-warm-up records.
type naive struct {
	completed, failed         int
	totalIn, totalOut         int
	duration                  float64
	ttfts, tpots, itls, e2els []float64 // seconds
	maxOutPerS, maxConcurrent float64
}

func naiveRef(recs []trace.Record) naive {
	var nv naive
	type out struct {
		start, ttft, latency float64
		itl                  []float64
	}
	var succ []out
	start, end := math.Inf(1), 0.0
	sawWarm := false
	for _, r := range recs {
		if r.Warmup {
			sawWarm = true
			continue
		}
		start = math.Min(start, float64(r.IntendedNs)/1e9)
		end = math.Max(end, float64(r.DoneNs)/1e9)
		ok := r.ErrorKind == "" && r.Status/100 == 2 && len(r.EventNs) > 0
		if !ok {
			nv.failed++
			continue
		}
		st := float64(r.SentNs) / 1e9
		o := out{start: st, ttft: float64(r.EventNs[0])/1e9 - st, latency: float64(r.EventNs[len(r.EventNs)-1])/1e9 - st}
		for i := 1; i < len(r.EventNs); i++ {
			o.itl = append(o.itl, float64(r.EventNs[i]-r.EventNs[i-1])/1e9)
		}
		outLen := int(r.CompletionTokens)
		if outLen <= 0 {
			outLen = 0
			for _, t := range r.EventTokens {
				outLen += int(t)
			}
		}
		promptLen := int(r.PromptTokens)
		if promptLen < 0 {
			promptLen = int(r.InputTokens)
		}
		nv.completed++
		nv.totalIn += promptLen
		nv.totalOut += outLen
		if outLen > 1 {
			nv.tpots = append(nv.tpots, (o.latency-o.ttft)/float64(outLen-1))
		}
		nv.itls = append(nv.itls, o.itl...)
		nv.ttfts = append(nv.ttfts, o.ttft)
		nv.e2els = append(nv.e2els, o.latency)
		succ = append(succ, o)
	}
	if !sawWarm {
		start = 0
	}
	nv.duration = end - start
	if len(succ) > 0 {
		minStart := math.Inf(1)
		for _, o := range succ {
			minStart = math.Min(minStart, o.start)
		}
		bins := map[int]float64{}
		for _, o := range succ {
			tt := o.start + o.ttft
			times := []float64{tt}
			for _, g := range o.itl {
				tt += g
				times = append(times, tt)
			}
			for _, x := range times {
				b := int(x - minStart + 1e-12) // float cumulative sums: nudge exact boundaries
				bins[b]++
				nv.maxOutPerS = math.Max(nv.maxOutPerS, bins[b])
			}
		}
		// Brute force: concurrency just after each start.
		for _, o := range succ {
			c := 0.0
			for _, p := range succ {
				if p.start <= o.start && o.start < p.start+p.latency-1e-12 {
					c++
				}
			}
			nv.maxConcurrent = math.Max(nv.maxConcurrent, c)
		}
	}
	return nv
}

func naiveStats(xs []float64, p float64) (mean, median, std, pct float64) {
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	q := func(p float64) float64 {
		h := float64(len(s)-1) * p / 100
		lo := int(h)
		if lo+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[lo] + (s[lo+1]-s[lo])*(h-float64(lo))
	}
	for _, x := range s {
		mean += x
	}
	mean /= float64(len(s))
	for _, x := range s {
		std += (x - mean) * (x - mean)
	}
	return mean * 1e3, q(50) * 1e3, math.Sqrt(std/float64(len(s))) * 1e3, q(p) * 1e3
}

func TestPropertyMatchesNaiveReference(t *testing.T) {
	dir := t.TempDir()
	for seed := range 60 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		recs := randomRecords(r)
		p := writeRecording(t, dir, fmt.Sprintf("r%d.parquet", seed), trace.RunMeta{}, recs)
		s, err := Files([]string{p}, Options{Percentiles: []float64{90}, Metrics: allMetrics})
		if err != nil {
			if len(recs) > 0 {
				t.Fatalf("seed %d: %v", seed, err)
			}
			continue
		}
		nv := naiveRef(asStored(recs))
		tag := fmt.Sprintf("seed %d", seed)
		if s.Completed != nv.completed || s.Failed != nv.failed || s.TotalInput != int64(nv.totalIn) || s.TotalOutput != int64(nv.totalOut) {
			t.Fatalf("%s: counts %d/%d tokens %d/%d, want %d/%d %d/%d", tag, s.Completed, s.Failed, s.TotalInput, s.TotalOutput,
				nv.completed, nv.failed, nv.totalIn, nv.totalOut)
		}
		close := func(name string, got, want float64) {
			if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("%s: %s = %.9g, want %.9g", tag, name, got, want)
			}
		}
		close("duration", s.Duration, nv.duration)
		close("peak output", s.MaxOutputTokensPerS, nv.maxOutPerS)
		close("peak concurrency", float64(s.MaxConcurrentRequests), nv.maxConcurrent)
		for _, m := range []struct {
			name string
			st   Stats
			xs   []float64
		}{{"ttft", s.TTFT, nv.ttfts}, {"tpot", s.TPOT, nv.tpots}, {"itl", s.ITL, nv.itls}, {"e2el", s.E2EL, nv.e2els}} {
			mean, median, std, p90 := naiveStats(m.xs, 90)
			close(m.name+" mean", m.st.Mean, mean)
			close(m.name+" median", m.st.Median, median)
			close(m.name+" std", m.st.Std, std)
			close(m.name+" p90", m.st.Percentiles[0].Value, p90)
		}
	}
}
