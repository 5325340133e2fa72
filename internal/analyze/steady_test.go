package analyze

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// rampRun is a run of 4 users, each sending 1 s requests back to back:
// user u starts at u s (a ramp-up 0-3 s with 1, 2, 3 then 4 in flight) and
// sends until its requests end at 10+u s (a drain 10-13 s with 3, 2, 1).
// Each request streams 4 one-token events at +ttft, +400, +700 and
// +1000 ms; ttft is 100 ms for the requests sent in the plateau 3-10 s,
// 300 ms for the others, so the plateau's figures are told apart.
func rampRun() []trace.Record {
	var recs []trace.Record
	for u := int64(0); u < 4; u++ {
		for s := u * 1000; s+1000 <= (10+u)*1000; s += 1000 {
			ttft := int64(300)
			if s >= 3000 && s < 10000 {
				ttft = 100
			}
			id := "u" + string(rune('0'+u)) + "-" + time.Duration(s*ms).String()
			recs = append(recs, rec(id, 0, s, s, s, s+1000, 200, "", 10, 10, 4, -1,
				[2]int64{s + ttft, 1}, [2]int64{s + 400, 1}, [2]int64{s + 700, 1}, [2]int64{s + 1000, 1}))
		}
	}
	return recs
}

func TestSteadyWindowOfRampPlateauDrain(t *testing.T) {
	s := Records(rampRun(), trace.RunMeta{}, Options{Percentiles: []float64{50, 99}})
	st := s.Steady
	if st == nil {
		t.Fatal("no steady window")
	}
	if st.FromNs != 3000*ms || st.ToNs != 10000*ms || st.PeakInFlight != 4 || st.MinInFlight != 4 {
		t.Fatalf("steady window %s-%s, peak %d, threshold %d; want 3s-10s, 4, 4", seconds(st.FromNs), seconds(st.ToNs), st.PeakInFlight, st.MinInFlight)
	}
	near(t, "steady mean in flight", st.MeanInFlight, 4)
	if st.Sent != 28 || st.Completed != 27 {
		t.Errorf("steady window: %d sent, %d completed; want 28 (7 per user), 27 (ends at 3..9 s; user 3's first ends at 4 s)", st.Sent, st.Completed)
	}
	near(t, "steady request throughput", st.RequestThroughput, 27.0/7)
	// 4 events a second per user, less user 3's missing end-of-request
	// event at 3 s: 111 one-token events in 7 s.
	near(t, "steady output throughput", st.OutputThroughput, 111.0/7)
	if st.TTFT.Min != 100 || st.TTFT.Max != 100 {
		t.Errorf("steady TTFT %v-%v ms, want the plateau's 100", st.TTFT.Min, st.TTFT.Max)
	}
	if s.TTFT.Max != 300 {
		t.Errorf("whole-run TTFT max %v, want the ramp's 300", s.TTFT.Max)
	}
	if whole := s.meanInFlight(); whole >= 4 {
		t.Errorf("whole-run mean in flight %.2f, want below the plateau's 4", whole)
	}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	s.writeSteady(w)
	w.Flush()
	if !strings.Contains(b.String(), "Steady window:                           3s-10s (7.00 s; >= 4 of the peak 4 in flight, ratio 0.80)") {
		t.Errorf("text:\n%s", b.String())
	}

	// --window steady analyzes the requests sent in the window.
	w2, err := ParseWindow("steady")
	if err != nil || !w2.IsSteady() {
		t.Fatalf("ParseWindow(steady) = %v, %v", w2, err)
	}
	ws := Records(rampRun(), trace.RunMeta{}, Options{Window: w2, Percentiles: []float64{50}})
	if ws.Requests != 28 || ws.ExcludedByWindow != 12 || ws.TTFT.Max != 100 {
		t.Errorf("--window steady: %d requests, %d outside, TTFT max %v; want 28, 12, 100", ws.Requests, ws.ExcludedByWindow, ws.TTFT.Max)
	}
	if ws.Steady == nil || ws.Steady.FromNs != 3000*ms || ws.Options.Window.String() != "steady 3s-10s" {
		t.Errorf("--window steady: window %q, steady %+v", ws.Options.Window, ws.Steady)
	}
}

// A dip in the middle of the plateau splits it: the longer part is the
// window.
func TestSteadyWindowLongestSpan(t *testing.T) {
	var recs []trace.Record
	add := func(id string, from, to int64) {
		recs = append(recs, rec(id, 0, from, from, from, to, 200, "", 1, 1, 2, -1, [2]int64{from + 10, 1}, [2]int64{to, 1}))
	}
	add("a", 0, 2000) // 2 in flight 0-2 s, 1 at 2-3 s, 2 at 3-8 s
	add("b", 0, 10000)
	add("c", 3000, 8000)
	s := Records(recs, trace.RunMeta{}, Options{})
	if st := s.Steady; st == nil || st.FromNs != 3000*ms || st.ToNs != 8000*ms || st.PeakInFlight != 2 {
		t.Fatalf("steady %+v, want 3s-8s of peak 2", st)
	}
}

func TestSlicesFollowTheLoad(t *testing.T) {
	s := Records(rampRun(), trace.RunMeta{}, Options{Slices: time.Second})
	if len(s.Slices) != 13 {
		t.Fatalf("%d slices over 13 s, want 13", len(s.Slices))
	}
	for i, want := range []float64{1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 3, 2, 1} {
		sl := s.Slices[i]
		near(t, "slice "+seconds(sl.FromNs)+" in flight", sl.MeanInFlight, want)
	}
	// Offered: each user sends one request a second from its start until
	// its last (started at 9+u s).
	for i, want := range []float64{1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 3, 2, 1} {
		near(t, "slice offered rate", s.Slices[i].OfferedRate, want)
	}
	if p := pctOf(s.Slices[5].TTFT, 50); p != 100 {
		t.Errorf("slice 5-6 s TTFT p50 %v, want 100", p)
	}
	if p := pctOf(s.Slices[0].TTFT, 99); p != 300 {
		t.Errorf("slice 0-1 s TTFT p99 %v, want 300", p)
	}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	s.writeSlices(w)
	w.Flush()
	if !strings.Contains(b.String(), "Load slices (1s)") || strings.Count(b.String(), "\n") != 16 {
		t.Errorf("slices text:\n%s", b.String())
	}
}
