package sweep

import (
	"math"
	"testing"

	"github.com/tracekit/tracekit/internal/analyze"
)

// Under capacity the offered rate and the throughput are measured with the
// same trim and agree, even when the sends trickle in first (a whole-span
// offered rate fell below the trimmed throughput): 10 sends 1 s apart, then
// 90 every 100 ms (10 req/s); each takes 2 s.
func TestOfferedAndThroughputShareAWindow(t *testing.T) {
	s := &analyze.Summary{Duration: 12, RequestThroughput: 100.0 / 12}
	for i := range 100 {
		at := int64(i) * 1e9
		if i >= 10 {
			at = 9e9 + int64(i-9)*100e6
		}
		s.Reqs = append(s.Reqs, analyze.Request{Success: true, IntendedNs: at, SentNs: at, DoneNs: at + 2e9})
	}
	var r StepResult
	Measure(&r, s, nil, nil, false)
	if math.Abs(r.Throughput-10) > 0.2 || math.Abs(r.OfferedRate-10) > 0.2 {
		t.Errorf("offered %.3f, throughput %.3f req/s: want both 10", r.OfferedRate, r.Throughput)
	}
	if r.Throughput > r.OfferedRate*1.02 {
		t.Errorf("throughput %.3f above offered %.3f under capacity", r.Throughput, r.OfferedRate)
	}
}
