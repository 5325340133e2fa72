package analyze

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// The per-token ITL keeps no samples of its own while every event carries
// one token (they are the per-event gaps); it must still equal the naive
// per-token gaps when a later request carries more tokens per event, when
// none does, and when the run has two endpoints.
func TestPerTokenITLSharedWithPerEvent(t *testing.T) {
	build := func(multiAt int, endpoints bool) ([]trace.Record, []float64, []float64) {
		r := rand.New(rand.NewPCG(uint64(multiAt)+1, 9))
		var recs []trace.Record
		var perEvent, perToken []float64
		for i := range 200 {
			sent := int64(i) * 3e6
			ev, tk := []int64{}, []int32{}
			t := sent + 20e6 + r.Int64N(5e6)
			for k := range 30 {
				n := int32(1)
				if k == 0 {
					n = 0 // role-only first chunk
				} else if i == multiAt && k%3 == 0 {
					n = 2 + int32(k%2) // a speculative step, and a 0-token event below
				} else if i == multiAt && k == 4 {
					n = 0
				}
				ev, tk = append(ev, t), append(tk, n)
				t += 1e6 + r.Int64N(9e6)
			}
			rec := trace.Record{RequestID: fmt.Sprint(i), IntendedNs: sent, SlotNs: sent, SentNs: sent, DoneNs: t, Status: 200,
				PromptTokens: 10, CompletionTokens: -1, CachedTokens: -1, EventNs: ev, EventTokens: tk}
			rec.RoundEvents() // as the file keeps them, so both paths see the same times
			carry := int64(0)
			for k := 1; k < len(ev); k++ {
				gap := ev[k] - ev[k-1]
				perEvent = append(perEvent, float64(gap)/1e9) // naiveStats takes seconds
				if tk[k] == 0 {
					carry += gap
					continue
				}
				perToken = append(perToken, float64(gap+carry)/float64(tk[k])/1e9)
				carry = 0
			}
			if endpoints && i%2 == 1 {
				rec.Endpoint = trace.EndpointCompletions
			}
			recs = append(recs, rec)
		}
		return recs, perEvent, perToken
	}
	for _, c := range []struct {
		name      string
		multiAt   int
		endpoints bool
	}{{"one token each", -1, false}, {"multi-token request late", 150, false}, {"first request multi-token", 0, false}, {"two endpoints", -1, true}} {
		recs, pe, pt := build(c.multiAt, c.endpoints)
		for _, viaFile := range []bool{false, true} {
			var s *Summary
			if viaFile {
				p := writeRecording(t, t.TempDir(), "r.parquet", trace.RunMeta{}, recs)
				var err error
				if s, err = Files([]string{p}, Options{Percentiles: []float64{90}}); err != nil {
					t.Fatal(err)
				}
			} else {
				s = Records(recs, trace.RunMeta{}, Options{Percentiles: []float64{90}})
			}
			for _, m := range []struct {
				name string
				st   Stats
				xs   []float64
			}{{"per event", s.ITLPerEvent, pe}, {"per token", s.ITLPerToken, pt}} {
				mean, median, std, p90 := naiveStats(m.xs, 90)
				for _, v := range [][2]float64{{m.st.Mean, mean}, {m.st.Median, median}, {m.st.Std, std}, {m.st.Percentiles[0].Value, p90}} {
					if math.Abs(v[0]-v[1]) > 1e-6*math.Max(1, math.Abs(v[1])) {
						t.Errorf("%s (file %v): ITL %s: %+v, want mean %g median %g std %g p90 %g", c.name, viaFile, m.name, m.st, mean, median, std, p90)
						break
					}
				}
				if m.st.Count != len(m.xs) {
					t.Errorf("%s (file %v): ITL %s counts %d, want %d", c.name, viaFile, m.name, m.st.Count, len(m.xs))
				}
			}
		}
	}
}
