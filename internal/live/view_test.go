package live

import (
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// The window holds what ended in its last 10 slots: percentiles, rates and
// failures come from those samples only, within the histogram's 1%.
func TestViewWindowFigures(t *testing.T) {
	now := 25 * time.Second
	v := NewView(NewFeed(4), Sources{Counts: func() Counts {
		return Counts{Total: 300, Done: 201, Failed: 2, InFlight: 7, Elapsed: now}
	}}, Options{Label: "replay run.parquet"})
	// Old samples (ended at 5 s): outside the window ending at 25 s.
	for range 100 {
		v.Add(Sample{DoneNs: int64(5 * time.Second), TTFTNs: int64(time.Second), E2ELNs: int64(2 * time.Second), OutputTokens: 50})
	}
	// 100 samples in the window, TTFT 1..100 ms, 10 tokens each.
	for i := 1; i <= 100; i++ {
		v.Add(Sample{DoneNs: int64(20 * time.Second), TTFTNs: int64(i) * int64(time.Millisecond),
			E2ELNs: int64(200 * time.Millisecond), ITLNs: []int64{int64(10 * time.Millisecond)}, OutputTokens: 10})
	}
	v.Add(Sample{DoneNs: int64(21 * time.Second), ErrorKind: "http_status"})
	s := v.Snapshot()
	if s.WindowDone != 101 || s.WindowFailed != 1 || s.FailedByKind["http_status"] != 1 {
		t.Fatalf("window done %d failed %d kinds %v", s.WindowDone, s.WindowFailed, s.FailedByKind)
	}
	near := func(name string, got, want float64) {
		if got < want*0.99 || got > want*1.01 {
			t.Errorf("%s = %g, want %g within 1%%", name, got, want)
		}
	}
	near("ttft p50", s.TTFT.P50Ms, 50)
	near("ttft p90", s.TTFT.P90Ms, 90)
	near("ttft p99", s.TTFT.P99Ms, 99)
	near("itl p50", s.ITL.P50Ms, 10)
	near("e2el p99", s.E2EL.P99Ms, 200)
	// At 25.0 s the window is the 9 whole slots 16..24 and the empty start
	// of slot 25: 9 s.
	near("req/s", s.RequestsPerS, 101.0/9)
	near("tok/s", s.OutputTokPerS, 1000.0/9)
	out := Render(s)
	for _, want := range []string{"replay run.parquet", "done 201/300", "in flight 7", "failed 2", "http_status 1", "TTFT", "50.3", "98.6", "11.2 req/s", "111 output tok/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("dashboard lacks %q:\n%s", want, out)
		}
	}
}

// A full feed drops and counts instead of waiting.
func TestFeedNeverWaits(t *testing.T) {
	f := NewFeed(2)
	rec := &trace.Record{SentNs: 1, DoneNs: 10, EventNs: []int64{3, 5, 9}}
	for range 5 {
		f.Offer(rec)
	}
	if f.Dropped() != 3 {
		t.Fatalf("dropped %d, want 3", f.Dropped())
	}
	s := <-f.ch
	if s.TTFTNs != 2 || len(s.ITLNs) != 2 || s.ITLNs[1] != 4 || s.E2ELNs != 9 {
		t.Fatalf("sample %+v", s)
	}
}
