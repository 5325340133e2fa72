package trace

import (
	"bufio"
	"bytes"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tracekit/tracekit/trace/tracetest"
)

// filledRecords returns records with every field set to a distinct
// non-zero value (NonStreaming included), so a codec that forgets a field
// gives a row that differs.
func filledRecords(t *testing.T) []Record {
	t.Helper()
	recs := make([]Record, 3)
	for i := range recs {
		tracetest.Fill(&recs[i], 1000*i)
		// The event lists are parallel and sorted, as a recording's are,
		// and each time is a whole microsecond after the send, as the
		// recording keeps it, so it reads back exactly.
		s := recs[i].SentNs
		recs[i].EventNs = []int64{s + int64(10*i+1)*1000, s + int64(10*i+2)*1000, s + int64(10*i+3)*1000}
		if z := tracetest.Zero(&recs[i]); len(z) > 0 {
			t.Fatalf("Fill left fields zero: %v", z)
		}
	}
	return recs
}

// TestEveryFieldRoundTrips writes rows with every field set through each
// codec of a trace.Record and trace.Turn, reads them back and compares:
// the trace and recording Parquet files (full read, and the column
// scanner on its column path and its row path), the recording journal and
// the trace journal.
func TestEveryFieldRoundTrips(t *testing.T) {
	dir := t.TempDir()
	recs := filledRecords(t)

	t.Run("recording parquet", func(t *testing.T) {
		p := filepath.Join(dir, "r.parquet")
		writeRecords(t, p, recs)
		got, _, err := ReadRecords(p)
		if err != nil {
			t.Fatal(err)
		}
		same(t, got, recs)
	})
	t.Run("column scanner", func(t *testing.T) {
		p := filepath.Join(dir, "r.parquet")
		s, err := OpenScanner(p, ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.pf == nil {
			t.Fatal("the column path was not taken")
		}
		s.Close()
		same(t, scanAll(t, p, ScanOptions{}), recs)
		same(t, scanAll(t, p, ScanOptions{Columns: RecordColumns()}), recs)
		same(t, scanAll(t, p, ScanOptions{Rows: true}), recs)
	})
	t.Run("journal", func(t *testing.T) {
		j := []byte(JournalMagic)
		for i := range recs {
			j = AppendJournalFrame(j, AppendRecordPayload(nil, &recs[i]))
		}
		jr, err := NewJournalReader(bytes.NewReader(j), "test", JournalMagic)
		if err != nil {
			t.Fatal(err)
		}
		var got []Record
		for {
			var r Record
			if err := jr.Next(&r); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		same(t, got, recs)
	})

	turns := make([]Turn, 3)
	for i := range turns {
		tracetest.Fill(&turns[i], 1000*i)
		if z := tracetest.Zero(&turns[i]); len(z) > 0 {
			t.Fatalf("Fill left turn fields zero: %v", z)
		}
	}
	t.Run("trace parquet", func(t *testing.T) {
		p := filepath.Join(dir, "t.parquet")
		var gen PromptGenerator
		tracetest.Fill(&gen, 7)
		w, err := NewTraceWriter(p, TraceMeta{Prompts: &gen})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(turns...); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, meta, err := ReadTurns(p)
		if err != nil {
			t.Fatal(err)
		}
		same(t, got, turns)
		if meta.Prompts == nil || *meta.Prompts != gen {
			t.Fatalf("prompt generator read back as %+v, wrote %+v", meta.Prompts, gen)
		}
	})
	t.Run("trace journal", func(t *testing.T) {
		j := []byte(TraceJournalMagic)
		for _, tu := range turns {
			p, err := AppendJSONPayload(nil, FrameTurn, tu)
			if err != nil {
				t.Fatal(err)
			}
			j = AppendJournalFrame(j, p)
		}
		jr, err := NewJournalReader(bufio.NewReader(bytes.NewReader(j)), "test", TraceJournalMagic)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := jr.ReadTraceJournal(nil)
		if err != nil {
			t.Fatal(err)
		}
		same(t, got, turns)
	})
}

func same[T any](t *testing.T, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows back, %d written", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			gv, wv := reflect.ValueOf(got[i]), reflect.ValueOf(want[i])
			for f := range gv.NumField() {
				if !reflect.DeepEqual(gv.Field(f).Interface(), wv.Field(f).Interface()) {
					t.Errorf("row %d: field %s: got %v, wrote %v", i, gv.Type().Field(f).Name, gv.Field(f), wv.Field(f))
				}
			}
		}
	}
}
