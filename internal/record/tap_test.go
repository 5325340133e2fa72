package record

import (
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// The tap sees every written record, in order, on the writer goroutine,
// after the file has it: a record the caller reuses after Submit reaches
// the tap as it was submitted.
func TestRecorderTapSeesEachWrittenRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.parquet")
	var seen []string
	var events []int
	r, err := NewRecorder(path, trace.RunMeta{}, RecorderOptions{Queue: 4, Tap: func(rec *trace.Record) {
		seen = append(seen, rec.RequestID)
		events = append(events, len(rec.EventNs))
	}})
	if err != nil {
		t.Fatal(err)
	}
	var rec trace.Record
	for i := range 50 {
		rec.RequestID = "r" + string(rune('a'+i%26)) + string(rune('0'+i/26))
		rec.EventNs = append(rec.EventNs[:0], make([]int64, i%5)...)
		r.Submit(&rec)
	}
	if err := r.Close(); err != nil { // waits for the writer: seen is complete
		t.Fatal(err)
	}
	if len(seen) != 50 {
		t.Fatalf("tap saw %d records, want 50", len(seen))
	}
	for i := range 50 {
		want := "r" + string(rune('a'+i%26)) + string(rune('0'+i/26))
		if seen[i] != want || events[i] != i%5 {
			t.Fatalf("record %d: tap saw %s with %d events, want %s with %d", i, seen[i], events[i], want, i%5)
		}
	}
	got, _, err := trace.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 {
		t.Fatalf("file holds %d records", len(got))
	}
}
