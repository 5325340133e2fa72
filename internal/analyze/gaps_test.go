package analyze

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
)

// writeOlderRecording writes recs as tracekit wrote recordings of schema
// version, with the event times in column: event_gap_us (schema 7, int64
// gaps of whole microseconds from sent_ns: the times must be on them),
// event_gap_ns (schema 6, nanosecond gaps, the first from sent_ns) or
// event_ns (before schema 6, the times as they are).
func writeOlderRecording(t *testing.T, path string, meta trace.RunMeta, recs []trace.Record, column string, version int) {
	t.Helper()
	disk := slices.Clone(recs)
	for i := range disk {
		ev := recs[i].EventNs
		disk[i].EventNs = make([]int64, len(ev))
		prev := disk[i].SentNs
		for j := range ev {
			switch column {
			case "event_gap_us":
				disk[i].EventNs[j] = (ev[j] - prev) / 1000
			case "event_gap_ns":
				disk[i].EventNs[j] = ev[j] - prev
			default:
				disk[i].EventNs[j] = ev[j]
			}
			prev = ev[j]
		}
	}
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[trace.Record](f,
		parquet.StructTag(reflect.StructTag(`parquet:"`+column+`,list" parquet-element:",delta"`), "EventNs"),
		parquet.KeyValueMetadata(trace.MetaFormat, trace.FormatRecording),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, strconv.Itoa(version)),
		parquet.KeyValueMetadata(trace.MetaRun, string(metaJSON)))
	if _, err := w.Write(disk); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Rows stamped to the nanosecond, written by today's writer (event_gap_us
// of doubles, schema 8), give the same detailed JSON report, per-request
// lists included, as the same rows rounded to what that file keeps,
// written as schema 7 (event_gap_us of int64), schema 6 (event_gap_ns)
// and schema 5 (event_ns) recordings: the layouts differ, the times
// analyzed do not.
func TestEventLayoutsReportAlike(t *testing.T) {
	recs, _ := benchRecords(300)
	recs = append(recs, handRecords()...)
	for i := range recs { // sub-microsecond stamps, as a run's are
		for j := range recs[i].EventNs {
			recs[i].EventNs[j] += int64((i*7 + j*13) % 1000)
		}
	}
	meta := trace.RunMeta{StartWallNs: 1_700_000_000e9}
	dirs := map[string]string{}
	for _, v := range []string{"8", "7", "6", "5"} {
		dirs[v] = t.TempDir()
	}
	writeRecording(t, dirs["8"], "rec.parquet", meta, recs)
	stored := slices.Clone(recs)
	for i := range stored {
		stored[i].EventNs = slices.Clone(recs[i].EventNs)
	}
	asStored(stored)
	writeOlderRecording(t, filepath.Join(dirs["7"], "rec.parquet"), meta, stored, "event_gap_us", 7)
	writeOlderRecording(t, filepath.Join(dirs["6"], "rec.parquet"), meta, stored, "event_gap_ns", 6)
	writeOlderRecording(t, filepath.Join(dirs["5"], "rec.parquet"), meta, stored, "event_ns", 5)
	report := func(v string) string {
		s, err := Files([]string{filepath.Join(dirs[v], "rec.parquet")}, Options{Metrics: allMetrics})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := s.WriteJSON(&b, true); err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(b.String(), dirs[v], "DIR")
	}
	a := report("8")
	for _, v := range []string{"7", "6", "5"} {
		if b := report(v); a != b {
			t.Fatalf("schema 8 and schema %s reports differ:\n%s\n---\n%s", v, a, b)
		}
	}
	if !strings.Contains(a, `"itl"`) || len(a) < 10_000 {
		t.Fatalf("the report has no per-request lists to compare (%d bytes)", len(a))
	}
}
