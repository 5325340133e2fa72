package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// BenchmarkRecordEncode measures the recording path end to end: b.N
// records of 200 one-token events (ITLs 10-20 ms, as a busy server
// streams) submitted to a record.Recorder, which journals them and
// encodes zstd Parquet on its writer goroutine; Close is inside the timer.
// Reports events/s and the file's bytes per event.
//
//	go test -run '^$' -bench RecordEncode -benchmem -benchtime 20000x ./bench/
func BenchmarkRecordEncode(b *testing.B) {
	const events = 200
	rng := rand.New(rand.NewPCG(1, 2))
	path := filepath.Join(b.TempDir(), "rec.parquet")
	rec := trace.Record{ConversationID: "c", Status: 200, PromptTokens: 1000, CompletionTokens: events - 1,
		CachedTokens: 0, TokensExact: true, EventNs: make([]int64, events), EventTokens: make([]int32, events)}
	r, err := record.NewRecorder(path, trace.RunMeta{}, record.RecorderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		sent := int64(i) * 5e6
		rec.RequestID = "c-" + itoa(i) + "-0"
		rec.IntendedNs, rec.SlotNs, rec.SentNs, rec.HeadersNs = sent, sent, sent+20e3, sent+1e6
		t := sent + 30e6 + rng.Int64N(20e6)
		for k := range events {
			rec.EventNs[k], rec.EventTokens[k] = t, 1
			t += 10e6 + rng.Int64N(10e6)
		}
		rec.EventTokens[0] = 0
		rec.DoneNs = t
		r.Submit(&rec)
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	total := float64(b.N) * events
	b.ReportMetric(total/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(st.Size())/total, "file-B/event")
}

func itoa(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(buf[n:])
		}
	}
}
