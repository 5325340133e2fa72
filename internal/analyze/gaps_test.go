package analyze

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
)

// writeSchema5Recording writes recs as tracekit wrote recordings before
// schema 6: the event times as they are, in column event_ns.
func writeSchema5Recording(t *testing.T, path string, meta trace.RunMeta, recs []trace.Record) {
	t.Helper()
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[trace.Record](f,
		parquet.StructTag(`parquet:"event_ns,list" parquet-element:",delta"`, "EventNs"),
		parquet.KeyValueMetadata(trace.MetaFormat, trace.FormatRecording),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, strconv.Itoa(5)),
		parquet.KeyValueMetadata(trace.MetaRun, string(metaJSON)))
	if _, err := w.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// The same rows written as schema 6 (event gaps) and as schema 5
// (absolute event_ns) give the same detailed JSON report, per-request
// lists included.
func TestGapLayoutReportsAsAbsolute(t *testing.T) {
	recs, _ := benchRecords(300)
	recs = append(recs, handRecords()...)
	meta := trace.RunMeta{StartWallNs: 1_700_000_000e9}
	v6, v5 := t.TempDir(), t.TempDir()
	writeRecording(t, v6, "rec.parquet", meta, recs)
	writeSchema5Recording(t, filepath.Join(v5, "rec.parquet"), meta, recs)
	report := func(dir string) string {
		s, err := Files([]string{filepath.Join(dir, "rec.parquet")}, Options{Metrics: allMetrics})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := s.WriteJSON(&b, true); err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(b.String(), dir, "DIR")
	}
	a, b := report(v6), report(v5)
	if a != b {
		t.Fatalf("schema 6 and schema 5 reports differ:\n%s\n---\n%s", a, b)
	}
	if !strings.Contains(a, `"itl"`) || len(a) < 10_000 {
		t.Fatalf("the report has no per-request lists to compare (%d bytes)", len(a))
	}
}
