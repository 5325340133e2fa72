package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// readRecStats counts a recording's requests, events and token events,
// and takes the gaps after each request's first event in whole
// microseconds; their entropy is that of the values' shares.
func TestReadRecStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.parquet")
	w, err := trace.NewRecordWriter(path, trace.RunMeta{})
	if err != nil {
		t.Fatal(err)
	}
	// Gaps 1, 2, 1, 4 ms (and the second request's 1 ms): shares 3/5,
	// 1/5, 1/5 of the values 1, 2 and 4 ms.
	recs := []trace.Record{
		{RequestID: "a", SentNs: 1e6, EventNs: []int64{51e6, 52e6, 54e6, 55e6 + 300, 59e6}, EventTokens: []int32{0, 1, 1, 1, 1}},
		{RequestID: "b", SentNs: 2e6, EventNs: []int64{60e6, 61e6}, EventTokens: []int32{1, 1}},
		{RequestID: "c", SentNs: 3e6},
	}
	if err := w.Write(recs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := readRecStats(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.requests != 3 || st.events != 7 || st.tokenEvents != 6 || st.gapBytes <= 0 || st.tokBytes <= 0 || st.bytes <= st.gapBytes+st.tokBytes {
		t.Fatalf("stats %+v", st)
	}
	want := []int64{1000, 1000, 1000, 2000, 4000} // the event at 55e6+300 ns is kept to the microsecond: 1 ms after the one before
	if len(st.gapsUs) != len(want) {
		t.Fatalf("gaps %v, want %v", st.gapsUs, want)
	}
	for i := range want {
		if st.gapsUs[i] != want[i] {
			t.Fatalf("gaps %v, want %v", st.gapsUs, want)
		}
	}
	h := -(0.6*math.Log2(0.6) + 2*0.2*math.Log2(0.2))
	if got := st.gapEntropyBits(); math.Abs(got-h) > 1e-12 {
		t.Errorf("entropy %v bits, want %v", got, h)
	}
	if st.gapQuantile(0.5) != 1000 || st.gapQuantile(0.99) != 4000 {
		t.Errorf("p50 %d p99 %d", st.gapQuantile(0.5), st.gapQuantile(0.99))
	}
}
