package analyze

import (
	"math/rand/v2"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// TestPeakOutputPerEventReference: counting each request's events per bin
// by binary search gives what binning every event does, including events
// past the one-week clamp.
func TestPeakOutputPerEventReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 2))
	for trial := range 20 {
		recs := randomRecords(r)
		if trial%2 == 0 { // a corrupt far-future tail on one request
			for i := range recs {
				if n := len(recs[i].EventNs); n > 1 && !recs[i].Warmup {
					for k := n / 2; k < n; k++ {
						recs[i].EventNs[k] = int64(maxSeriesBins+3)*nsPerSec + int64(k)
					}
					recs[i].DoneNs = recs[i].EventNs[n-1]
					break
				}
			}
		}
		s := Records(recs, trace.RunMeta{}, Options{})
		var succ []*Request
		m := int64(-1)
		for i := range s.Reqs {
			if q := &s.Reqs[i]; q.Success {
				succ = append(succ, q)
				if m < 0 || q.SentNs < m {
					m = q.SentNs
				}
			}
		}
		counts := map[int64]int{}
		want := 0
		for _, t := range s.eventTimes {
			if t >= m {
				b := min((t-m)/nsPerSec, maxSeriesBins-1)
				counts[b]++
				want = max(want, counts[b])
			}
		}
		if got := s.MaxOutputTokensPerS; got != float64(want) {
			t.Errorf("trial %d: peak %v, per-event reference %d", trial, got, want)
		}
	}
}
