package analyze

import (
	"errors"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// benchRecords is a synthetic run: n requests of 200 events each.
func benchRecords(n int) ([]trace.Record, int) {
	r := rand.New(rand.NewPCG(1, 1))
	recs := make([]trace.Record, n)
	events := 0
	for i := range recs {
		sent := int64(i) * 5e6
		t := sent + 30e6 + r.Int64N(50e6)
		ev, tk := make([]int64, 200), make([]int32, 200)
		for k := range ev {
			ev[k], tk[k] = t, 1
			t += 10e6 + r.Int64N(10e6)
		}
		tk[0] = 0
		recs[i] = trace.Record{RequestID: "r", IntendedNs: sent, SlotNs: sent, SentNs: sent, DoneNs: t, Status: 200,
			PromptTokens: 1000, CompletionTokens: 199, CachedTokens: 500, EventNs: ev, EventTokens: tk}
		events += len(ev)
	}
	return recs, events
}

func reportEvents(b *testing.B, events int) {
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCompute measures the analysis alone (records already decoded).
func BenchmarkCompute(b *testing.B) {
	recs, events := benchRecords(5000)
	b.ResetTimer()
	for range b.N {
		Records(recs, trace.RunMeta{}, Options{})
	}
	reportEvents(b, events)
}

// BenchmarkDecode measures reading the recording's rows with parquet-go.
func BenchmarkDecode(b *testing.B) {
	recs, events := benchRecords(5000)
	p := writeRecording(b, b.TempDir(), "bench.parquet", trace.RunMeta{}, recs)
	rows := make([]trace.Record, readBatch)
	b.ResetTimer()
	for range b.N {
		r, err := trace.OpenRecording(p)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Read(rows)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
	}
	reportEvents(b, events)
}

// BenchmarkReadColumns measures the column decoding alone (trace's
// RecordScanner with analyze's columns, what Files uses instead of
// BenchmarkDecode's generic reader).
func BenchmarkReadColumns(b *testing.B) {
	recs, events := benchRecords(5000)
	p := writeRecording(b, b.TempDir(), "bench.parquet", trace.RunMeta{}, recs)
	b.ResetTimer()
	for range b.N {
		in, err := openInput(p, true)
		if err != nil || in.events() == 0 {
			b.Fatal(err, "no column path")
		}
		if err := in.r.Scan(func(int64, *trace.Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
		in.close()
	}
	reportEvents(b, events)
}

// BenchmarkFiles measures decode and analysis together, as the command runs.
func BenchmarkFiles(b *testing.B) {
	recs, events := benchRecords(5000)
	p := writeRecording(b, b.TempDir(), "bench.parquet", trace.RunMeta{}, recs)
	b.ResetTimer()
	for range b.N {
		if _, err := Files([]string{p}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	reportEvents(b, events)
}

// TestBenchmarkRecordingShape keeps the benchmark's input honest without
// timing anything: every event is counted once.
func TestBenchmarkRecordingShape(t *testing.T) {
	recs, events := benchRecords(50)
	p := writeRecording(t, t.TempDir(), "b.parquet", trace.RunMeta{}, recs)
	s, err := Files([]string{filepath.Clean(p)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.ITLPerEvent.Count + s.Completed; got != events {
		t.Errorf("gaps + first events = %d, want %d", got, events)
	}
}

// BenchmarkStats measures the statistics of one per-event distribution of
// a million gaps, written as the analysis writes them (appendGaps: the
// unsorted samples' passes of summarize, with their key bounds known).
func BenchmarkStats(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	d := newDist(0)
	ts := make([]int64, 1<<10)
	for range 1 << 10 {
		for i := 1; i < len(ts); i++ {
			ts[i] = ts[i-1] + 10e6 + r.Int64N(10e6)
		}
		d.appendGaps(ts)
	}
	if !d.bounds().ok {
		b.Fatal("no bounds")
	}
	b.ResetTimer()
	for range b.N {
		d.Stats([]float64{50, 90, 99})
	}
	reportEvents(b, d.Len())
}
