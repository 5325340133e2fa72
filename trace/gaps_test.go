package trace

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/tracekit/tracekit/trace/tracetest"
)

// gapEdgeRecords are rows with no, one and many events, an event stamped
// before its send, and times at the ends of int64.
func gapEdgeRecords() []Record {
	rec := func(id string, sent int64, ev ...int64) Record {
		toks := make([]int32, len(ev))
		for i := range toks {
			toks[i] = int32(i % 3)
		}
		return Record{RequestID: id, SentNs: sent, DoneNs: sent + 1, Status: 200, EventNs: ev, EventTokens: toks,
			Parents: []int32{}, After: []int32{}}
	}
	many := make([]int64, 500)
	for i := range many {
		many[i] = 2e9 + int64(i)*10_000_123
	}
	return []Record{
		rec("none", 5e8, []int64{}...),
		rec("one", 1e9, 1e9+42e6),
		rec("many", 2e9-30e6, many...),
		rec("before sent", 3e9, 3e9-7, 3e9+5, 3e9+5),
		rec("extremes", -5, math.MinInt64, math.MaxInt64, 0, math.MaxInt64, math.MinInt64),
	}
}

// readEventColumn reads the file's raw list column name, row by row.
func readEventColumn(t *testing.T, path, name string) [][]int64 {
	t.Helper()
	type row struct {
		Events []int64 `parquet:"events,list"`
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewGenericReader[row](pf, parquet.StructTag(reflect.StructTag(`parquet:"`+name+`,list"`), "Events"))
	rows := make([]row, pf.NumRows())
	if n, _ := r.Read(rows); n != len(rows) {
		t.Fatalf("read %d of %d rows of %s", n, len(rows), name)
	}
	out := make([][]int64, len(rows))
	for i := range rows {
		out[i] = rows[i].Events
	}
	return out
}

func stampedVersion(t *testing.T, path string) int {
	t.Helper()
	v, _ := tracetest.OpenParquet(t, path).Lookup(MetaSchemaVersion)
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The event times go to disk as gaps (the first from sent_ns) and come
// back as the times written, through every reader, whatever the values;
// the caller's rows are left as they were.
func TestEventGapsRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "g.parquet")
	want := gapEdgeRecords()
	written := make([]Record, len(want))
	for i, r := range want {
		written[i] = r
		written[i].EventNs = slices.Clone(r.EventNs)
	}
	writeRecords(t, p, written)
	if !reflect.DeepEqual(written, want) {
		t.Fatal("Write changed the caller's rows")
	}
	if v := stampedVersion(t, p); v != 6 {
		t.Errorf("stamped %d, want 6", v)
	}
	disk := readEventColumn(t, p, "event_gap_ns")
	for i, r := range want {
		prev := r.SentNs
		for j, ev := range r.EventNs {
			if disk[i][j] != ev-prev {
				t.Fatalf("row %d event %d: %d on disk, want the gap %d", i, j, disk[i][j], ev-prev)
			}
			prev = ev
		}
	}
	got, _, err := ReadRecords(p)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, want)
	rr, err := OpenRecording(p)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]Record, 2) // several reads into reused rows
	var byBatch []Record
	for {
		n, err := rr.Read(batch)
		for _, r := range batch[:n] {
			r.EventNs = slices.Clone(r.EventNs)
			byBatch = append(byBatch, r)
		}
		if err != nil {
			break
		}
	}
	rr.Close()
	same(t, byBatch, want)
	same(t, scanAll(t, p, ScanOptions{}), want)
	same(t, scanAll(t, p, ScanOptions{Rows: true}), want)
	// Written one row per call, the reused gap buffers hand no row's gaps
	// to another.
	one := filepath.Join(t.TempDir(), "one.parquet")
	w, err := NewRecordWriter(one, RunMeta{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range want {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err = ReadRecords(one)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, want)
	// Asked for the events without sent_ns, the scanner still starts the
	// gaps there, and leaves SentNs zero as asked.
	for i, r := range scanAll(t, p, ScanOptions{Columns: []string{"request_id", "event_gap_ns"}}) {
		if r.SentNs != 0 || !slices.Equal(r.EventNs, want[i].EventNs) {
			t.Fatalf("row %d: sent %d events %v, want sent 0 events %v", i, r.SentNs, r.EventNs, want[i].EventNs)
		}
	}
}

// A recording whose rows have no event keeps the version its other columns
// need: an older reader finds no event_ns and reads no events, which is
// right.
func TestEventlessRecordingKeepsOlderVersion(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e.parquet")
	writeRecords(t, p, []Record{{RequestID: "a", SentNs: 1, Status: 500, ErrorKind: ErrHTTPStatus}})
	if v := stampedVersion(t, p); v != recordingVersionBase {
		t.Errorf("stamped %d, want %d", v, recordingVersionBase)
	}
	got, _, err := ReadRecords(p)
	if err != nil || len(got) != 1 || len(got[0].EventNs) != 0 {
		t.Fatalf("read %+v, %v", got, err)
	}
}

// writeLegacyRecording writes recs as a schema-5 tracekit did: the
// absolute times in column event_ns.
func writeLegacyRecording(t *testing.T, path string, recs []Record) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[Record](f, legacyEventTag, parquet.KeyValueMetadata(MetaFormat, FormatRecording),
		parquet.KeyValueMetadata(MetaSchemaVersion, "5"), parquet.MaxRowsPerRowGroup(700))
	if _, err := w.Write(recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// A schema-5 recording (absolute event_ns) reads as it always did, through
// every reader, and its raw column holds the times themselves.
func TestSchema5RecordingReadsAsBefore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v5.parquet")
	want := append(gapEdgeRecords(), randomRecords(rand.New(rand.NewPCG(3, 4)), 1500)...)
	writeLegacyRecording(t, p, want)
	disk := readEventColumn(t, p, "event_ns")
	if !slices.Equal(disk[2], want[2].EventNs) {
		t.Fatal("the legacy file does not hold absolute times in event_ns")
	}
	got, _, err := ReadRecords(p)
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, want)
	s, err := OpenScanner(p, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.pf == nil {
		t.Fatal("a schema-5 recording must take the column path")
	}
	if s.Events() < 1500 {
		t.Errorf("footer events %d", s.Events())
	}
	s.Close()
	same(t, scanAll(t, p, ScanOptions{}), want)
	same(t, scanAll(t, p, ScanOptions{Rows: true}), want)
}
