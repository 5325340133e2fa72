package trace

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/tracekit/tracekit/trace/tracetest"
)

// eventRecord is a request sent at sent with events at ev, one token
// each but the first.
func eventRecord(id string, sent int64, ev ...int64) Record {
	toks := make([]int32, len(ev))
	for i := range toks {
		toks[i] = int32(i % 3)
	}
	return Record{RequestID: id, SentNs: sent, DoneNs: sent + 1, Status: 200, EventNs: ev, EventTokens: toks,
		Parents: []int32{}, After: []int32{}}
}

// eventEdgeRecords are rows with no, one and many events, events stamped
// before their send and on every side of a half microsecond, and a gap of
// thirty days.
func eventEdgeRecords() []Record {
	many := make([]int64, 500)
	for i := range many {
		many[i] = 2e9 + int64(i)*10_000_123 + int64(i*i%1000)
	}
	const day = 24 * 3600 * int64(1e9)
	return []Record{
		eventRecord("none", 5e8, []int64{}...),
		eventRecord("one", 1e9+3, 1e9+42e6+499),
		eventRecord("many", 2e9-30e6+317, many...),
		eventRecord("before sent", 3e9, 3e9-1501, 3e9-1500, 3e9-501, 3e9-500, 3e9-499, 3e9-7, 3e9, 3e9+499, 3e9+500, 3e9+1500),
		eventRecord("huge gap", 4e9+123, 4e9+1e6+499, 4e9+30*day+777, 4e9+30*day+1777),
	}
}

// wantOffsetUs is o = round((t - sent) / 1000) in exact arithmetic, a
// half away from zero: the reference RoundUs is checked against.
func wantOffsetUs(t testing.TB, ev, sent int64) int64 {
	t.Helper()
	d := new(big.Int).Sub(big.NewInt(ev), big.NewInt(sent))
	neg := d.Sign() < 0
	q := new(big.Int).Abs(d)
	q.Add(q, big.NewInt(500)).Quo(q, big.NewInt(1000))
	if neg {
		q.Neg(q)
	}
	if !q.IsInt64() {
		t.Fatalf("offset of %d from %d does not fit int64", ev, sent)
	}
	return q.Int64()
}

// wantEventsUs is recs with their event times as a recording gives them
// back, by the reference: sent_ns + 1000 * o.
func wantEventsUs(t testing.TB, recs []Record) []Record {
	t.Helper()
	out := slices.Clone(recs)
	for i := range out {
		out[i].EventNs = make([]int64, len(recs[i].EventNs))
		for j, ev := range recs[i].EventNs {
			v := new(big.Int).Mul(big.NewInt(wantOffsetUs(t, ev, recs[i].SentNs)), big.NewInt(1000))
			v.Add(v, big.NewInt(recs[i].SentNs))
			if !v.IsInt64() {
				t.Fatalf("row %d event %d: %d read back does not fit int64", i, j, v)
			}
			out[i].EventNs[j] = v.Int64()
		}
	}
	return out
}

// rounded is recs with RoundEvents applied to copies.
func rounded(recs []Record) []Record {
	out := slices.Clone(recs)
	for i := range out {
		out[i].EventNs = slices.Clone(out[i].EventNs)
		out[i].RoundEvents()
	}
	return out
}

func TestRoundUs(t *testing.T) {
	for _, c := range []struct{ d, want int64 }{
		{0, 0}, {1, 0}, {499, 0}, {500, 1}, {501, 1}, {999, 1}, {1000, 1}, {1499, 1}, {1500, 2}, {2500, 3},
		{-1, 0}, {-499, 0}, {-500, -1}, {-501, -1}, {-1000, -1}, {-1499, -1}, {-1500, -2}, {-2500, -3},
		{math.MaxInt64, 9223372036854776}, {math.MinInt64, -9223372036854776},
		{math.MaxInt64 - 307, 9223372036854776}, {math.MaxInt64 - 308, 9223372036854775},
		{math.MinInt64 + 308, -9223372036854776}, {math.MinInt64 + 309, -9223372036854775},
	} {
		if got := RoundUs(c.d); got != c.want {
			t.Errorf("RoundUs(%d) = %d, want %d", c.d, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		d := int64(rng.Uint64())
		if rng.IntN(2) == 0 {
			d %= 1e7
		}
		if got, want := RoundUs(d), wantOffsetUs(t, d, 0); got != want {
			t.Fatalf("RoundUs(%d) = %d, want %d", d, got, want)
		}
	}
}

// readEventColumn reads the file's raw list column name, row by row, as
// values of E (the column's own type, so nothing is converted).
func readEventColumn[E int64 | float64](t *testing.T, path, name string) [][]E {
	t.Helper()
	type row struct {
		Events []E `parquet:"events,list"`
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
	out := make([][]E, len(rows))
	for i := range rows {
		out[i] = rows[i].Events
	}
	return out
}

// eventChunk is the metadata of the first row group's chunk of the
// file's event column.
func eventChunk(t *testing.T, path string) format.ColumnMetaData {
	t.Helper()
	for _, c := range tracetest.OpenParquet(t, path).Metadata().RowGroups[0].Columns {
		if c.MetaData.PathInSchema[0] == "event_gap_us" {
			return c.MetaData
		}
	}
	t.Fatalf("%s: no event_gap_us column", path)
	return format.ColumnMetaData{}
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

// readAllWays reads the recording at path through every reader (the whole
// file, OpenRecording in small batches into reused rows, the column
// scanner on its column path and on its row path), checks they agree and
// returns the rows.
func readAllWays(t *testing.T, path string) []Record {
	t.Helper()
	whole, _, err := ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := OpenRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]Record, 2)
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
	s, err := OpenScanner(path, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.pf == nil {
		t.Fatalf("%s: the column path was not taken", path)
	}
	s.Close()
	same(t, byBatch, whole)
	same(t, scanAll(t, path, ScanOptions{}), whole)
	same(t, scanAll(t, path, ScanOptions{Rows: true}), whole)
	return whole
}

// The event times go to disk as microsecond offsets from sent_ns, as
// gaps held in doubles split into byte streams, and come back as
// sent_ns + 1000 * the offset, through every reader: within 500 ns of
// each stamp, exactly the reference rounding, whatever the values (before
// the send, thirty days after it); the caller's rows are left as they
// were, and no older event column is written.
func TestEventTimesMicrosecond(t *testing.T) {
	p := filepath.Join(t.TempDir(), "g.parquet")
	stamped := eventEdgeRecords()
	want := wantEventsUs(t, stamped)
	written := make([]Record, len(stamped))
	for i, r := range stamped {
		written[i] = r
		written[i].EventNs = slices.Clone(r.EventNs)
	}
	writeRecords(t, p, written)
	if !reflect.DeepEqual(written, stamped) {
		t.Fatal("Write changed the caller's rows")
	}
	if v := stampedVersion(t, p); v != 8 {
		t.Errorf("stamped %d, want 8", v)
	}
	if c := eventChunk(t, p); c.Type != format.Double || !slices.Contains(c.Encoding, format.ByteStreamSplit) || c.Codec != format.Zstd {
		t.Errorf("event_gap_us is %v in %v, compressed %v: want DOUBLE, BYTE_STREAM_SPLIT, ZSTD", c.Type, c.Encoding, c.Codec)
	}
	schema := tracetest.OpenParquet(t, p).Schema()
	for _, old := range []string{"event_gap_ns", "event_ns"} {
		if _, ok := schema.Lookup(old, "list", "element"); ok {
			t.Errorf("the file has a column %s", old)
		}
	}
	disk := readEventColumn[float64](t, p, "event_gap_us")
	for i, r := range stamped {
		prev := int64(0)
		for j, ev := range r.EventNs {
			o := wantOffsetUs(t, ev, r.SentNs)
			if disk[i][j] != float64(o-prev) {
				t.Fatalf("row %d event %d: %v on disk, want the gap %d us", i, j, disk[i][j], o-prev)
			}
			prev = o
		}
	}
	got := readAllWays(t, p)
	same(t, got, want)
	same(t, rounded(stamped), want)
	for i, r := range got {
		for j, ev := range r.EventNs {
			if e := ev - stamped[i].EventNs[j]; e < -500 || e > 500 {
				t.Fatalf("row %d event %d: read %d, stamped %d", i, j, ev, stamped[i].EventNs[j])
			}
		}
	}
	// Written one row per call, the reused gap buffers hand no row's gaps
	// to another.
	one := filepath.Join(t.TempDir(), "one.parquet")
	w, err := NewRecordWriter(one, RunMeta{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range stamped {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	same(t, readAllWays(t, one), want)
	// Asked for the events without sent_ns, the scanner still starts the
	// offsets there, and leaves SentNs zero as asked.
	for i, r := range scanAll(t, p, ScanOptions{Columns: []string{"request_id", "event_gap_us"}}) {
		if r.SentNs != 0 || !slices.Equal(r.EventNs, want[i].EventNs) {
			t.Fatalf("row %d: sent %d events %v, want sent 0 events %v", i, r.SentNs, r.EventNs, want[i].EventNs)
		}
	}
	// Times already on a microsecond from sent_ns read back exactly.
	p2 := filepath.Join(t.TempDir(), "exact.parquet")
	writeRecords(t, p2, want)
	same(t, readAllWays(t, p2), want)
}

// Times on both sides of the ends of int64 wrap like int64 arithmetic on
// the way to disk and back: each reads back within 500 ns of its stamp,
// modulo 2^64. Gaps of exactly ±2^53 µs, the most a double holds with
// every whole number below it, read back exactly.
func TestEventTimesWrap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w.parquet")
	const far = 1 << 53 * 1000 // ns
	stamped := []Record{
		eventRecord("past max", math.MaxInt64-1000, math.MaxInt64-500, math.MinInt64+500, math.MinInt64+2e9),
		eventRecord("before min", math.MinInt64+1000, math.MinInt64+400, math.MaxInt64-700, math.MaxInt64-5e9),
		eventRecord("2^53 us", 0, far, 0, -far, 0),
	}
	writeRecords(t, p, stamped)
	if disk := readEventColumn[float64](t, p, "event_gap_us")[2]; !slices.Equal(disk, []float64{1 << 53, -(1 << 53), -(1 << 53), 1 << 53}) {
		t.Errorf("gaps of 2^53 us stored as %v", disk)
	}
	got := readAllWays(t, p)
	same(t, got, rounded(stamped))
	for i, r := range got {
		for j, ev := range r.EventNs {
			if e := ev - stamped[i].EventNs[j]; e < -500 || e > 500 { // wraps as the stored arithmetic does
				t.Fatalf("row %d event %d: read %d, stamped %d", i, j, ev, stamped[i].EventNs[j])
			}
		}
	}
}

// A gap beyond ±2^53 µs has no exact double: Write refuses the rows,
// naming the file, the row, its request and the event, and writes none of
// them; the writer takes rows again after that.
func TestEventGapBeyondDoubleRefused(t *testing.T) {
	const far = 1 << 53 * 1000 // ns: 2^53 µs
	for _, c := range []struct {
		rec  Record
		want string
	}{
		{eventRecord("ahead", 0, far+1000), "event 0 (at 9007199254740993000 ns, sent at 0 ns): its event_gap_us element would be 9007199254740993"},
		{eventRecord("back", 0, 5000, -far+3999), "event 1 (at -9007199254740988001 ns, sent at 0 ns): its event_gap_us element would be -9007199254740993"},
		{eventRecord("extremes", -5, math.MinInt64, math.MaxInt64), "event 0"},
	} {
		p := filepath.Join(t.TempDir(), "far.parquet")
		w, err := NewRecordWriter(p, RunMeta{})
		if err != nil {
			t.Fatal(err)
		}
		ok := eventRecord("ok", 1e9, 1e9+7e6)
		err = w.Write(ok, c.rec)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `row 1 (request "`+c.rec.RequestID+`")`) ||
			!strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "beyond the ±2^53") {
			t.Errorf("%s: %v", c.rec.RequestID, err)
		}
		if err := w.Write(ok); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		same(t, readAllWays(t, p), []Record{ok})
	}
}

// Many requests over several row groups: every reader agrees, every time
// is the reference rounding, and the events column holds microseconds.
func TestEventTimesAcrossRowGroups(t *testing.T) {
	p := filepath.Join(t.TempDir(), "many.parquet")
	rng := rand.New(rand.NewPCG(9, 10))
	stamped := make([]Record, 2*RowGroupRows+333)
	for i := range stamped {
		sent := rng.Int64N(1e12)
		ev := make([]int64, rng.IntN(60))
		at := sent - 1000 + rng.Int64N(1e8) // sometimes before the send
		for j := range ev {
			ev[j] = at
			at += rng.Int64N(30e6)
		}
		stamped[i] = eventRecord("r"+strconv.Itoa(i), sent, ev...)
	}
	writeRecords(t, p, stamped)
	if n := len(tracetest.OpenParquet(t, p).RowGroups()); n < 3 {
		t.Fatalf("%d row groups, want several", n)
	}
	same(t, readAllWays(t, p), wantEventsUs(t, stamped))
}

// A recording whose rows have no event keeps the version its other columns
// need: an older reader finds no event column and reads no events, which
// is right.
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

// writeOlderRecording writes recs as a tracekit of schema version did,
// with the event times in layout's column (eventsGapUsInt: schema 7,
// int64 gaps of microsecond offsets from sent_ns; eventsGapNs: schema 6,
// nanosecond gaps from sent_ns; eventsAbsolute: before 6, the times),
// row groups of 700 rows.
func writeOlderRecording(t *testing.T, path string, recs []Record, layout eventLayout, version int) {
	t.Helper()
	disk := slices.Clone(recs)
	for i := range disk {
		ev := recs[i].EventNs
		disk[i].EventNs = make([]int64, len(ev))
		switch layout {
		case eventsGapUsInt:
			prev := int64(0)
			for j := range ev {
				o := RoundUs(ev[j] - recs[i].SentNs)
				disk[i].EventNs[j], prev = o-prev, o
			}
		case eventsGapNs:
			prev := recs[i].SentNs
			for j := range ev {
				disk[i].EventNs[j], prev = ev[j]-prev, ev[j]
			}
		default:
			copy(disk[i].EventNs, ev)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[Record](f, eventTag(layout), parquet.KeyValueMetadata(MetaFormat, FormatRecording),
		parquet.KeyValueMetadata(MetaSchemaVersion, strconv.Itoa(version)), parquet.MaxRowsPerRowGroup(700))
	if _, err := w.Write(disk); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// Recordings of schema 7 (int64 microsecond gaps in event_gap_us), 6
// (nanosecond gaps in event_gap_ns) and before (absolute event_ns) read
// as they always did, through every reader: to the microsecond as schema
// 7 kept them, to the nanosecond before; their raw columns hold what
// those versions wrote.
func TestOlderEventLayoutsRead(t *testing.T) {
	stamped := append(eventEdgeRecords(), eventRecord("extremes", -5, math.MinInt64, math.MaxInt64, 0, math.MaxInt64, math.MinInt64))
	stamped = append(stamped, randomRecords(rand.New(rand.NewPCG(3, 4)), 1500)...)
	o0, o1 := RoundUs(stamped[2].EventNs[0]-stamped[2].SentNs), RoundUs(stamped[2].EventNs[1]-stamped[2].SentNs)
	for _, c := range []struct {
		layout  eventLayout
		version int
		raw     []int64 // row 2's column as written
		want    []Record
	}{
		{eventsGapUsInt, 7, []int64{o0, o1 - o0}, rounded(stamped)},
		{eventsGapNs, 6, []int64{stamped[2].EventNs[0] - stamped[2].SentNs, stamped[2].EventNs[1] - stamped[2].EventNs[0]}, stamped},
		{eventsAbsolute, 5, stamped[2].EventNs[:2], stamped},
	} {
		name, want := eventColumns[c.layout], c.want
		t.Run(fmt.Sprint(c.version), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), name+".parquet")
			writeOlderRecording(t, p, stamped, c.layout, c.version)
			if disk := readEventColumn[int64](t, p, name); !slices.Equal(disk[2][:2], c.raw) {
				t.Fatalf("%s holds %v, want %v", name, disk[2][:2], c.raw)
			}
			if c.layout == eventsGapUsInt {
				if c := eventChunk(t, p); c.Type != format.Int64 {
					t.Fatalf("event_gap_us is %v", c.Type)
				}
			}
			same(t, readAllWays(t, p), want)
			s, err := OpenScanner(p, ScanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Events() < 1500 {
				t.Errorf("footer events %d", s.Events())
			}
			s.Close()
			for i, r := range scanAll(t, p, ScanOptions{Columns: []string{"request_id", "event_gap_us"}}) {
				if !slices.Equal(r.EventNs, want[i].EventNs) {
					t.Fatalf("row %d: events %v, want %v", i, r.EventNs, want[i].EventNs)
				}
			}
		})
	}
}

// A file holding the event times in two layouts is refused by every
// reader, naming the file and both columns, rather than read from one of
// them.
func TestTwoEventColumnsRefused(t *testing.T) {
	type twoColumns struct {
		RequestID string  `parquet:"request_id"`
		SentNs    int64   `parquet:"sent_ns"`
		A         []int64 `parquet:"a,list"`
		B         []int64 `parquet:"b,list"`
	}
	for _, pair := range [][2]eventLayout{{eventsGapUs, eventsGapNs}, {eventsGapUs, eventsAbsolute}, {eventsGapNs, eventsAbsolute}} {
		a, b := eventColumns[pair[0]], eventColumns[pair[1]]
		p := filepath.Join(t.TempDir(), a+"+"+b+".parquet")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[twoColumns](f,
			parquet.StructTag(reflect.StructTag(`parquet:"`+a+`,list"`), "A"), parquet.StructTag(reflect.StructTag(`parquet:"`+b+`,list"`), "B"),
			parquet.KeyValueMetadata(MetaFormat, FormatRecording), parquet.KeyValueMetadata(MetaSchemaVersion, "7"))
		if _, err := w.Write([]twoColumns{{RequestID: "x", SentNs: 1, A: []int64{2}, B: []int64{3}}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		check := func(how string, err error) {
			t.Helper()
			if err == nil || !errors.Is(err, ErrWrongFormat) || !strings.Contains(err.Error(), p) ||
				!strings.Contains(err.Error(), a+" and "+b) {
				t.Errorf("%s of a file with %s and %s: %v", how, a, b, err)
			}
		}
		_, err = OpenRecording(p)
		check("OpenRecording", err)
		_, _, err = ReadRecords(p)
		check("ReadRecords", err)
		_, err = OpenScanner(p, ScanOptions{})
		check("OpenScanner", err)
		_, err = OpenScanner(p, ScanOptions{Rows: true})
		check("OpenScanner by rows", err)
	}
}

// A schema-8 file whose event_gap_us holds a value that is not a whole
// number of microseconds within ±2^53 (not written by tracekit) is
// refused by every reader, naming the file, the row and the column,
// rather than read with the value rounded; ±2^53 itself reads.
func TestEventGapNotWholeRefused(t *testing.T) {
	write := func(t *testing.T, bad float64) string {
		p := filepath.Join(t.TempDir(), "bad.parquet")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		rows := make([]recordRow, 300)
		for i := range rows {
			rows[i] = recordRow{Record: eventRecord(fmt.Sprint("r", i), int64(i)*1e9, 0, 0), EventGapUs: []float64{50_000, 20_001}}
		}
		rows[250].EventGapUs[1] = bad
		w := parquet.NewGenericWriter[recordRow](f, hideEventNs, parquet.MaxRowsPerRowGroup(100),
			parquet.KeyValueMetadata(MetaFormat, FormatRecording), parquet.KeyValueMetadata(MetaSchemaVersion, "8"))
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	for _, bad := range []float64{1.5, -0.25, 20_000.000001, math.NaN(), math.Inf(1), math.Inf(-1), 1<<53 + 2, -(1<<53 + 2), 1e300} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			p := write(t, bad)
			check := func(how string, err error) {
				t.Helper()
				want := fmt.Sprintf("event_gap_us element 1 is %v: expected a whole number of microseconds", bad)
				if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "row 250") || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v, want the file, row 250 and %q", how, err, want)
				}
			}
			_, _, err := ReadRecords(p)
			check("ReadRecords", err)
			rr, err := OpenRecording(p)
			if err != nil {
				t.Fatal(err)
			}
			rows := make([]Record, 64)
			for err == nil {
				_, err = rr.Read(rows)
			}
			rr.Close()
			check("OpenRecording", err)
			for _, opts := range []ScanOptions{{}, {Rows: true}, {Columns: []string{"event_gap_us"}}} {
				s, err := OpenScanner(p, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !opts.Rows && s.pf == nil {
					t.Fatal("the column path was not taken")
				}
				check(fmt.Sprintf("Scan %+v", opts), s.Scan(func(int64, *Record) error { return nil }))
				s.Close()
			}
		})
	}
	for _, edge := range []float64{1 << 53, -(1 << 53), math.Copysign(0, -1)} {
		p := write(t, edge)
		got := readAllWays(t, p)
		if o := got[250].EventNs[1] - got[250].SentNs; o != 1000*(50_000+int64(edge)) {
			t.Errorf("%v read back as an offset of %d ns", edge, o)
		}
	}
}
