package trace

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchEventRecords is n requests of 101 events each, the first 50-51 ms
// after the send and without a token (a role chunk), then one token every
// 20-22 ms: a served model's steady stream.
func benchEventRecords(n int) ([]Record, int) {
	r := rand.New(rand.NewPCG(5, 6))
	recs := make([]Record, n)
	events := 0
	for i := range recs {
		sent := int64(i) * 25e6
		ev, tk := make([]int64, 101), make([]int32, 101)
		t := sent + 50e6 + r.Int64N(1e6)
		for k := range ev {
			ev[k], tk[k] = t, 1
			t += 20e6 + r.Int64N(2e6)
		}
		tk[0] = 0
		recs[i] = Record{RequestID: "r", ConversationID: "c", Target: "http://127.0.0.1:8000", IntendedNs: sent, SlotNs: sent,
			SentNs: sent, HeadersNs: sent + 1e6, DoneNs: t, Status: 200, PromptTokens: 100, CompletionTokens: 100,
			CachedTokens: -1, EventNs: ev, EventTokens: tk}
		events += len(ev)
	}
	return recs, events
}

// BenchmarkRecordWriter measures writing a recording: rows through
// RecordWriter into a file, Close included. Reports events/s and the
// file's bytes per event.
func BenchmarkRecordWriter(b *testing.B) {
	recs, events := benchEventRecords(2000)
	p := filepath.Join(b.TempDir(), "w.parquet")
	b.ReportAllocs()
	for b.Loop() {
		w, err := NewRecordWriter(p, RunMeta{})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(recs); i += 64 { // the recorder's batches are small
			if err := w.Write(recs[i:min(i+64, len(recs))]...); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if st, err := os.Stat(p); err == nil {
		b.ReportMetric(float64(st.Size())/float64(events), "B/event")
	}
}

// BenchmarkReadRecords measures reading a whole recording through the
// generic row reader.
func BenchmarkReadRecords(b *testing.B) {
	recs, events := benchEventRecords(2000)
	p := filepath.Join(b.TempDir(), "r.parquet")
	writeRecords(b, p, recs)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ReadRecords(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
