package trace

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// The on-disk layouts of Record.EventNs. Each file holds exactly one of
// these columns (a file without events may hold none); the reader takes
// the layout from the column it finds.
//
//	event_gap_us (schema 7 on): o_i = RoundUs(EventNs[i] - SentNs), the
//	    event's offset from the send in whole microseconds; element 0 is
//	    o_0 and element i is o_i - o_{i-1}. Read back,
//	    EventNs[i] = SentNs + 1000*o_i.
//	event_gap_ns (schema 6): element 0 is EventNs[0] - SentNs and element
//	    i is EventNs[i] - EventNs[i-1], in nanoseconds.
//	event_ns (before schema 6): the times themselves.
//
// Gaps restart near zero at every request, where absolute times jump back
// by seconds at each request boundary; Parquet's delta encoding packs
// each run of values by its widest delta, so gaps pack narrow.
// Microseconds drop the low ten bits of every gap, which are below the
// stamps' own accuracy.
//
// Rounding the offsets, not the gaps, bounds every event time's error by
// half a microsecond, however long the stream: |EventNs[i] read back -
// EventNs[i]| <= 500 ns, so a gap read back is within 1 µs of the one
// stamped, and no error accumulates along the stream. The arithmetic
// wraps like int64's both ways, so any values (an event stamped before
// SentNs, times at the ends of int64) read back within those 500 ns,
// modulo 2^64.
type eventLayout uint8

const (
	eventsGapUs    eventLayout = iota // event_gap_us: offsets in µs, as gaps
	eventsGapNs                       // event_gap_ns: gaps in ns
	eventsAbsolute                    // event_ns: times in ns
)

// eventColumns names each layout's column. eventsGapUs's is Record's own
// tag; the older names are never written again, so a query written for an
// older layout fails on a newer file instead of misreading it.
var eventColumns = [...]string{
	eventsGapUs:    "event_gap_us",
	eventsGapNs:    "event_gap_ns",
	eventsAbsolute: "event_ns",
}

// eventLayoutOf finds which event column schema s holds: eventsGapUs when
// it holds none (a recording without events reads the same in any
// layout). A file with two of them is refused: its times would be read
// from one and the other ignored.
func eventLayoutOf(s *parquet.Schema) (eventLayout, error) {
	has := func(name string) bool { // the list's leaf, or a column of another shape under the name
		_, list := s.Lookup(name, "list", "element")
		_, other := s.Lookup(name)
		return list || other
	}
	layout, found := eventsGapUs, []string(nil)
	for l, name := range eventColumns {
		if has(name) {
			layout, found = eventLayout(l), append(found, name)
		}
	}
	if len(found) > 1 {
		return 0, fmt.Errorf("the event times are in %d columns, %s: a recording holds one of %s: %w",
			len(found), strings.Join(found, " and "), strings.Join(eventColumns[:], ", "), ErrWrongFormat)
	}
	return layout, nil
}

// readerOptions are what a generic row reader needs to read layout l into
// Record.EventNs: the column's name in place of Record's tag.
func (l eventLayout) readerOptions() []parquet.ReaderOption {
	if l == eventsGapUs {
		return nil
	}
	return []parquet.ReaderOption{eventTag(l)}
}

// eventTag is the struct tag that maps Record.EventNs to layout l's
// column (to read an older file, or to write one in a test).
func eventTag(l eventLayout) parquet.SchemaOption {
	return parquet.StructTag(reflect.StructTag(`parquet:"`+eventColumns[l]+`,list" parquet-element:",delta"`), "EventNs")
}

// absolute turns a row's event list, as read in layout l, into
// run-relative times in place.
func (l eventLayout) absolute(ev []int64, sent int64) {
	switch l {
	case eventsGapUs:
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
// o_0, element i is o_i - o_{i-1}.
func appendGapsUs(dst, ts []int64, sent int64) []int64 {
	prev := int64(0)
	for _, t := range ts {
		o := RoundUs(t - sent)
		dst = append(dst, o-prev)
		prev = o
	}
	return dst
}

// gapRows returns rows with EventNs in the event_gap_us form for writing,
// leaving rows and their lists untouched: the rows with events are copied
// into *scratch and their gaps into *buf (both reused from call to call;
// the writer copies the values before returning).
func gapRows(rows []Record, scratch *[]Record, buf *[]int64) []Record {
	n := 0
	for i := range rows {
		n += len(rows[i].EventNs)
	}
	if n == 0 {
		return rows
	}
	out, gaps := (*scratch)[:0], (*buf)[:0]
	if cap(gaps) < n {
		gaps = make([]int64, 0, n)
	}
	for i := range rows {
		r := rows[i]
		if len(r.EventNs) > 0 {
			k := len(gaps)
			gaps = appendGapsUs(gaps, r.EventNs, r.SentNs)
			r.EventNs = gaps[k:len(gaps):len(gaps)]
		}
		out = append(out, r)
	}
	*scratch, *buf = out[:0], gaps[:0]
	return out
}
