package trace

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// The on-disk layouts of Record.EventNs. Each file holds exactly one of
// these columns (a file without events may hold none); the reader takes
// the layout from the column it finds and, for event_gap_us, its type.
//
//	event_gap_us of DOUBLE (schema 8 on): o_i = RoundUs(EventNs[i] -
//	    SentNs), the event's offset from the send in whole microseconds;
//	    element 0 is o_0 and element i is o_i - o_{i-1}, each a whole
//	    number held as a double, BYTE_STREAM_SPLIT encoded. A double holds
//	    every whole number up to 2^53 in magnitude exactly (2^53 µs is
//	    about 285 years), so the writer refuses a gap beyond that and a
//	    reader a value that is not such a whole number (a fraction, NaN,
//	    an infinity) rather than round it. Read back,
//	    EventNs[i] = SentNs + 1000*o_i.
//	event_gap_us of INT64 (schema 7): the same values as int64, delta
//	    encoded.
//	event_gap_ns (schema 6): element 0 is EventNs[0] - SentNs and element
//	    i is EventNs[i] - EventNs[i-1], in nanoseconds.
//	event_ns (before schema 6): the times themselves.
//
// Gaps restart near zero at every request, where absolute times jump back
// by seconds at each request boundary, and microseconds drop the low ten
// bits of every gap, which are below the stamps' own accuracy. Schema 7's
// delta encoding packed each block of 128 values at the width of its
// widest change, and every block of a recording holds a request boundary
// (from the inter-token gaps to the next request's first offset, then to
// its role chunk's few microseconds), so most gaps packed at 16-17 bits.
// BYTE_STREAM_SPLIT instead stores byte k of every value in a stream of
// its own, which zstd then compresses: a whole number below 2^16 leaves
// the low four bytes of its double zero, and the top bytes (sign,
// exponent, leading bits) repeat from gap to gap, so what zstd keeps is
// mostly the bytes that vary. The values are doubles because readers
// decode BYTE_STREAM_SPLIT for floating point only (DuckDB 1.5 refuses it
// for integers).
//
// Rounding the offsets, not the gaps, bounds every event time's error by
// half a microsecond, however long the stream: |EventNs[i] read back -
// EventNs[i]| <= 500 ns, so a gap read back is within 1 µs of the one
// stamped, and no error accumulates along the stream. The arithmetic
// wraps like int64's both ways, so any values whose gaps are within
// 2^53 µs (an event stamped before SentNs, times on both sides of the
// ends of int64) read back within those 500 ns, modulo 2^64.
type eventLayout uint8

const (
	eventsGapUs    eventLayout = iota // event_gap_us of DOUBLE: offsets in µs, as gaps
	eventsGapUsInt                    // event_gap_us of INT64: the same as int64
	eventsGapNs                       // event_gap_ns: gaps in ns
	eventsAbsolute                    // event_ns: times in ns
)

// eventColumns names each layout's column. eventsGapUs's is Record's own
// tag and recordRow's; schema 8 kept schema 7's name, its values being the
// same whole microseconds. The older names are never written again, so a
// query written for an older layout fails on a newer file instead of
// misreading it.
var eventColumns = [...]string{
	eventsGapUs:    "event_gap_us",
	eventsGapUsInt: "event_gap_us",
	eventsGapNs:    "event_gap_ns",
	eventsAbsolute: "event_ns",
}

// namedLayouts are the layouts of distinct column names, newest first
// (eventsGapUsInt shares eventsGapUs's).
var namedLayouts = []eventLayout{eventsGapUs, eventsGapNs, eventsAbsolute}

// eventLayoutOf finds which event column schema s holds: eventsGapUs when
// it holds none (a recording without events reads the same in any
// layout). event_gap_us is schema 7's when its values are not floating
// point. A file with two event columns is refused: its times would be
// read from one and the other ignored.
func eventLayoutOf(s *parquet.Schema) (eventLayout, error) {
	layout, found, names := eventsGapUs, []string(nil), []string(nil)
	for _, l := range namedLayouts {
		name := eventColumns[l]
		names = append(names, name)
		leaf, ok := s.Lookup(name, "list", "element")
		if !ok {
			leaf, ok = s.Lookup(name) // a column of another shape under the name
		}
		if !ok {
			continue
		}
		layout, found = l, append(found, name)
		if l == eventsGapUs && !(leaf.Node.Leaf() && (leaf.Node.Type().Kind() == parquet.Double || leaf.Node.Type().Kind() == parquet.Float)) {
			layout = eventsGapUsInt
		}
	}
	if len(found) > 1 {
		return 0, fmt.Errorf("the event times are in %d columns, %s: a recording holds one of %s: %w",
			len(found), strings.Join(found, " and "), strings.Join(names, ", "), ErrWrongFormat)
	}
	return layout, nil
}

// kind is the physical type of layout l's values.
func (l eventLayout) kind() parquet.Kind {
	if l == eventsGapUs {
		return parquet.Double
	}
	return parquet.Int64
}

// recordRow is a row as a recording of schema 8 holds it: Record's
// columns, with EventGapUs in place of EventNs's (hideEventNs drops that
// one; Record's tag still names the column, for the scanner and to read
// the older layouts into EventNs). One struct embedding Record keeps the
// writer on parquet-go's fast path, which maps a Go type to its columns
// without reflection per value; the column comes last in the file.
type recordRow struct {
	Record
	EventGapUs []float64 `parquet:"event_gap_us,list" parquet-element:",split"`
}

var (
	hideEventNs    = parquet.StructTag(`parquet:"-"`, "EventNs")
	hideEventGapUs = parquet.StructTag(`parquet:"-"`, "EventGapUs")
)

// recordingPageBytes is the page size RecordWriter writes: about 100,000
// event doubles with their levels. The four zero byte streams of a page
// of parquet-go's default 256 KiB (about 25,000 doubles) take some 100
// KiB, less than one zstd block (128 KiB), where zstd's decoder is slow
// to rebuild them: measured on the bench's 20 ms streams, a page
// decompresses in about 10 ns a value at 25,000 values, under 2 ns at
// 100,000, and the file is a little smaller. Larger pages slow
// parquet-go's row reader (ReadRecords) down.
const recordingPageBytes = 1 << 20

// recordWriterOptions are the options RecordWriter writes recordRow with.
var recordWriterOptions = []parquet.WriterOption{hideEventNs, parquet.PageBufferSize(recordingPageBytes)}

// readerOptions are what a generic row reader of recordRow needs to read
// layout l: schema 8's column into EventGapUs, an older one into EventNs.
func (l eventLayout) readerOptions() []parquet.ReaderOption {
	if l == eventsGapUs {
		return []parquet.ReaderOption{hideEventNs}
	}
	return []parquet.ReaderOption{hideEventGapUs, eventTag(l)}
}

// eventTag is the struct tag that maps Record.EventNs to the column of
// layout l, an integer one (to read an older file, or to write one in a
// test).
func eventTag(l eventLayout) parquet.SchemaOption {
	return parquet.StructTag(reflect.StructTag(`parquet:"`+eventColumns[l]+`,list" parquet-element:",delta"`), "EventNs")
}

// maxExactUs bounds the event_gap_us values a double holds exactly: every
// whole number of magnitude up to 2^53 is one, 2^53 + 1 is not.
const maxExactUs = 1 << 53

// absolute turns a row's event list, as read in layout l, into
// run-relative times in place. In layout eventsGapUs the list holds its
// doubles' bits (doubleBits); a value that is not a whole number within
// ±2^53 (a fraction, NaN, an infinity) was not written by appendGapsUs and
// would have to be rounded into a time, so it is an error naming its
// element.
func (l eventLayout) absolute(ev []int64, sent int64) error {
	switch l {
	case eventsGapUs:
		o := int64(0)
		for i, bits := range ev {
			g := math.Float64frombits(uint64(bits))
			v := int64(g) // any value for g out of range; the test below refuses it
			if !(g >= -maxExactUs && g <= maxExactUs) || float64(v) != g {
				return fmt.Errorf("%s element %d is %v: expected a whole number of microseconds within ±2^53", eventColumns[l], i, g)
			}
			o += v
			ev[i] = sent + 1000*o
		}
	case eventsGapUsInt:
		o := int64(0)
		for i, g := range ev {
			o += g
			ev[i] = sent + 1000*o
		}
	case eventsGapNs:
		t := sent
		for i, g := range ev {
			t += g
			ev[i] = t
		}
	}
	return nil
}

// doubleBits is f's storage seen as int64s, the values' bits, for absolute
// to turn into times in place (a double and an int64 take the same eight
// bytes): no second buffer of a row group's events.
func doubleBits(f []float64) []int64 {
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
}

// RoundUs is d nanoseconds rounded to the nearest whole microsecond, a
// half rounded away from zero: 1499 ns is 1 µs, 1500 ns 2 µs, -1500 ns
// -2 µs, -1499 ns -1 µs. Go's division truncates toward zero, so
// q = d/1000 and r = d%1000 (with the sign of d, |r| < 1000) give
// d = 1000q + r, and q moves one step away from zero when |r| >= 500. It
// is exact for every int64 (nothing overflows: |q| <= MaxInt64/1000 + 1).
func RoundUs(d int64) int64 {
	q, r := d/1000, d%1000
	switch {
	case r >= 500:
		q++
	case r <= -500:
		q--
	}
	return q
}

// StoredEventTime is the time a recording keeps for an event stamped at t
// of a request sent at sent: sent + 1000*RoundUs(t - sent), within 500 ns
// of t. RoundUs never decreases as its argument grows, so stored times
// keep the order of the stamps; to compare an event read back with
// another time of its request (headers_ns, done_ns, kept to the
// nanosecond), pass that time through StoredEventTime too.
func StoredEventTime(sent, t int64) int64 { return sent + 1000*RoundUs(t-sent) }

// RoundEvents sets r's event times, in place, to what a recording keeps
// of them (StoredEventTime). Reading a recording back gives these times;
// a figure computed from records in memory gives what analyze of the file
// gives once they are rounded so.
func (r *Record) RoundEvents() {
	for i, t := range r.EventNs {
		r.EventNs[i] = StoredEventTime(r.SentNs, t)
	}
}

// appendGapsUs appends the event_gap_us form of ts (the event times of a
// request sent at sent) to dst: o_i = RoundUs(ts[i] - sent), element 0 is
// o_0, element i is o_i - o_{i-1}. A gap beyond ±2^53 µs has no exact
// double: the error names its event rather than store it rounded.
func appendGapsUs(dst []float64, ts []int64, sent int64) ([]float64, error) {
	prev := int64(0)
	for i, t := range ts {
		o := RoundUs(t - sent)
		g := o - prev
		if g > maxExactUs || g < -maxExactUs {
			return dst, fmt.Errorf("event %d (at %d ns, sent at %d ns): its %s element would be %d, beyond the ±2^53 a double holds exactly", i, t, sent, eventColumns[eventsGapUs], g)
		}
		dst = append(dst, float64(g))
		prev = o
	}
	return dst, nil
}

// diskRows returns rows as a recording holds them, leaving rows and their
// lists untouched: copies in *scratch with their gaps in *buf (both reused
// from call to call; the writer copies the values before returning).
// first is the file's row number of rows[0], for errors.
func diskRows(rows []Record, scratch *[]recordRow, buf *[]float64, first int64) ([]recordRow, error) {
	n := 0
	for i := range rows {
		n += len(rows[i].EventNs)
	}
	out, gaps := (*scratch)[:0], (*buf)[:0]
	if cap(gaps) < n {
		gaps = make([]float64, 0, n)
	}
	for i := range rows {
		k := len(gaps)
		var err error
		if gaps, err = appendGapsUs(gaps, rows[i].EventNs, rows[i].SentNs); err != nil {
			return nil, fmt.Errorf("row %d (request %q): %w", first+int64(i), rows[i].RequestID, err)
		}
		out = append(out, recordRow{Record: rows[i], EventGapUs: gaps[k:len(gaps):len(gaps)]})
	}
	*scratch, *buf = out[:0], gaps[:0]
	return out, nil
}
