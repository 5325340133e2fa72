package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/tracekit/tracekit/internal/hugepage"
)

// Column scanning. parquet-go's generic row reader rebuilds every row
// through reflection and copies its lists, which costs several times an
// analysis of the rows. A RecordScanner instead decodes a recording column
// by column, one row group at a time, into flat buffers reused from row
// group to row group: only the columns asked for, the event lists straight
// from the pages' decoded values with row boundaries from the repetition
// levels. Memory stays bounded by two row groups (RowGroupRows rows each:
// the one being read and the next, decoding).
//
// The columns are Record's own, found by reflection on its parquet tags, so
// a field added to Record is scanned without a change here (a field of a
// type the scanner cannot decode makes recordColumns panic, which the
// round-trip test catches).

// colKind is how one Record field is decoded.
type colKind uint8

const (
	kString colKind = iota
	kInt32
	kInt64
	kBool
	kListInt64
	kListInt32
)

// recordColumn is one Record field: its column name, how it decodes, and
// where it sits in the struct.
type recordColumn struct {
	name  string
	field string
	kind  colKind
	off   uintptr
	unset bool // tagged unset:"0": 0 means "none" (see Record.Shift)
}

func (c recordColumn) parquetKind() (parquet.Kind, int) {
	switch c.kind {
	case kString:
		return parquet.ByteArray, 0
	case kInt32:
		return parquet.Int32, 0
	case kInt64:
		return parquet.Int64, 0
	case kBool:
		return parquet.Boolean, 0
	case kListInt64:
		return parquet.Int64, 1
	}
	return parquet.Int32, 1
}

// path is the column's path in the schema (lists use the 3-level LIST
// layout).
func (c recordColumn) path() []string {
	if c.kind == kListInt64 || c.kind == kListInt32 {
		return []string{c.name, "list", "element"}
	}
	return []string{c.name}
}

// recordColumns lists Record's columns in field order.
var recordColumns = sync.OnceValue(func() []recordColumn {
	t := reflect.TypeFor[Record]()
	var cols []recordColumn
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("parquet")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		c := recordColumn{name: name, field: f.Name, off: f.Offset, unset: f.Tag.Get("unset") == "0"}
		list := strings.Contains(opts, "list")
		switch {
		case f.Type.Kind() == reflect.String:
			c.kind = kString
		case f.Type.Kind() == reflect.Int32:
			c.kind = kInt32
		case f.Type.Kind() == reflect.Int64:
			c.kind = kInt64
		case f.Type.Kind() == reflect.Bool:
			c.kind = kBool
		case list && f.Type == reflect.TypeFor[[]int64]():
			c.kind = kListInt64
		case list && f.Type == reflect.TypeFor[[]int32]():
			c.kind = kListInt32
		default:
			panic(fmt.Sprintf("trace: Record.%s (%s, tag %q) has a type the column scanner does not decode", f.Name, f.Type, tag))
		}
		cols = append(cols, c)
	}
	return cols
})

// RecordColumns returns the names of a recording's columns, in Record's
// field order.
func RecordColumns() []string {
	var names []string
	for _, c := range recordColumns() {
		names = append(names, c.name)
	}
	return names
}

// ScanOptions select what a RecordScanner decodes.
type ScanOptions struct {
	// Columns names the columns to decode (Record's parquet names, see
	// RecordColumns); the other fields of the scanned records stay zero.
	// Nil decodes every column.
	Columns []string
	// Rows decodes through parquet-go's generic row reader instead: every
	// field, slower. It is the reference the column path is tested
	// against, and what a file of another layout is read with.
	Rows bool
}

// RecordScanner reads a recording once, row by row, for an analysis: see
// OpenScanner.
type RecordScanner struct {
	path string
	// Meta is the file's run metadata.
	Meta RunMeta
	r    *RecordReader
	fh   *os.File      // nil: rows go through r
	pf   *parquet.File // with fh
	cols []scanColumn  // with fh
}

// scanColumn is one requested column and where it is in this file's
// schema: idx < 0 when the file lacks it (an older recording), so the
// field stays zero as the row reader leaves it. events marks the event
// times, turned into run-relative times after decoding (rowGroup.absolute);
// hidden a column decoded only for that (sent_ns when not asked for),
// left zero in the records.
type scanColumn struct {
	recordColumn
	idx    int
	events bool
	hidden bool
}

// OpenScanner opens and validates the recording at path for one pass.
// When the file's schema is the one Record writes (each requested column
// present with its type, or absent), the columns are decoded directly;
// otherwise (a column optional or of another type) rows go through the
// generic reader, with every field set.
func OpenScanner(path string, opts ScanOptions) (*RecordScanner, error) {
	want := map[string]bool{}
	for _, n := range opts.Columns {
		want[n] = true
	}
	var cols []recordColumn
	for _, c := range recordColumns() {
		if opts.Columns == nil || want[c.name] {
			cols = append(cols, c)
			delete(want, c.name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("scanning %s: %q is not a recording column", path, n)
	}
	r, err := OpenRecording(path)
	if err != nil {
		return nil, err
	}
	s := &RecordScanner{path: path, Meta: r.Meta, r: r}
	if opts.Rows {
		return s, nil
	}
	fh, pf, err := openColumns(path)
	if err != nil {
		r.Close()
		return nil, err
	}
	sc, ok := findColumns(pf.Schema(), withSent(cols), r.layout)
	if !ok {
		fh.Close()
		return s, nil
	}
	s.fh, s.pf, s.cols = fh, pf, sc
	return s, nil
}

// withSent adds sent_ns, hidden, to cols holding the event times without
// it: the gaps start there.
func withSent(cols []recordColumn) []scanColumn {
	out := make([]scanColumn, len(cols), len(cols)+1)
	events, sent := false, false
	for i, c := range cols {
		out[i] = scanColumn{recordColumn: c, events: c.field == "EventNs"}
		events = events || out[i].events
		sent = sent || c.name == "sent_ns"
	}
	if events && !sent {
		for _, c := range recordColumns() {
			if c.name == "sent_ns" {
				out = append(out, scanColumn{recordColumn: c, hidden: true})
			}
		}
	}
	return out
}

// findColumns places cols in schema s; ok is false when one is there with
// another type or repetition. The event times are found in the column of
// the file's layout (event_gap_us, or an older file's event_gap_ns or
// event_ns), of its type.
func findColumns(s *parquet.Schema, cols []scanColumn, layout eventLayout) ([]scanColumn, bool) {
	out := make([]scanColumn, len(cols))
	for i, sc := range cols {
		c := sc.recordColumn
		out[i] = sc
		out[i].idx = -1
		if sc.events {
			c.name = eventColumns[layout]
			out[i].name = c.name // errors name the file's column
		}
		leaf, found := s.Lookup(c.path()...)
		if !found {
			if _, other := s.Lookup(c.name); other {
				return nil, false // present, but not in the layout Record writes
			}
			continue
		}
		kind, rep := c.parquetKind()
		if sc.events {
			kind = layout.kind()
		}
		if leaf.Node.Type().Kind() != kind || leaf.MaxRepetitionLevel != rep || leaf.MaxDefinitionLevel != rep {
			return nil, false
		}
		out[i].idx = leaf.ColumnIndex
	}
	return out, true
}

// NumRows is the number of rows in the file.
func (s *RecordScanner) NumRows() int64 { return s.r.NumRows() }

// Events is the footer's count of the event column's levels (events,
// plus one per empty list): an upper bound of the events, 0 when unknown.
func (s *RecordScanner) Events() int {
	if s.pf == nil {
		return 0
	}
	idx := -1
	for _, c := range s.cols {
		if c.field == "EventNs" {
			idx = c.idx
		}
	}
	if idx < 0 {
		return 0
	}
	n := 0
	for _, rg := range s.pf.RowGroups() {
		n += int(rg.ColumnChunks()[idx].NumValues())
	}
	return n
}

// Close releases the file.
func (s *RecordScanner) Close() error {
	err := s.r.Close()
	if s.fh != nil {
		err = errors.Join(err, s.fh.Close())
	}
	return err
}

// Scan calls fn with every row in file order. The record's lists alias
// the scanner's buffers and are valid only during the call. An error from
// fn stops the scan and is returned as is; a decoding error names the
// file and the row group or row.
//
// The next row group decodes on a goroutine of Scan's while fn reads the
// current one (two row groups' buffers take turns), so decoding and the
// caller's work share two cores; fn is still called from Scan's goroutine
// alone, row by row in file order. The goroutine ends before Scan returns.
func (s *RecordScanner) Scan(fn func(row int64, rec *Record) error) error {
	if s.pf == nil {
		return s.scanRows(fn)
	}
	groups := s.pf.RowGroups()
	type decoded struct {
		g   *rowGroup
		err error
	}
	var (
		out  = make(chan decoded)
		free = make(chan *rowGroup, 2) // the buffers not being read by fn
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	free <- &rowGroup{cols: s.cols, layout: s.r.layout, bufs: make([]colBuf, len(s.cols))}
	free <- &rowGroup{cols: s.cols, layout: s.r.layout, bufs: make([]colBuf, len(s.cols))}
	wg.Go(func() {
		defer close(out)
		first := int64(0)
		for _, rg := range groups {
			var g *rowGroup
			select {
			case g = <-free:
			case <-stop:
				return
			}
			err := g.read(rg, first)
			first += rg.NumRows()
			select {
			case out <- decoded{g, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	var (
		rec Record
		row int64
		k   int
	)
	for d := range out {
		if d.err != nil {
			return fmt.Errorf("%s: row group %d (rows %d-%d): %w", s.path, k, row, row+groups[k].NumRows()-1, d.err)
		}
		for i := range d.g.rows {
			d.g.record(i, &rec)
			if err := fn(row, &rec); err != nil {
				return err
			}
			row++
		}
		free <- d.g // room for both: never blocks
		k++
	}
	if n := s.NumRows(); row != n {
		return fmt.Errorf("%s: read %d rows, footer says %d (truncated?)", s.path, row, n)
	}
	return nil
}

// scanRows is Scan through the generic row reader.
func (s *RecordScanner) scanRows(fn func(row int64, rec *Record) error) error {
	rows := make([]Record, 1024)
	var row int64
	for {
		n, err := s.r.Read(rows)
		for k := range rows[:n] {
			if err := fn(row, &rows[k]); err != nil {
				return err
			}
			row++
		}
		if errors.Is(err, io.EOF) {
			if total := s.NumRows(); row != total {
				return fmt.Errorf("%s: read %d rows, footer says %d (truncated?)", s.path, row, total)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s after row %d: %w", s.path, row, err)
		}
	}
}

// colBuf holds one column of one row group: scalars in the slice of their
// kind, lists as flat values with per-row start offsets closed by a final
// one (row i is vals[offs[i]:offs[i+1]]).
type colBuf struct {
	str  []string
	i32  []int32
	i64  []int64
	bool []bool
	offs []int
}

// rowGroup is one row group's decoded columns, with scratch space reused
// across row groups.
type rowGroup struct {
	rows    int
	cols    []scanColumn
	layout  eventLayout // how the file holds the event times
	bufs    []colBuf
	vals    []parquet.Value // scratch for scalar pages
	bytes   []byte          // scratch for string pages
	strEnds []int
}

// read decodes row group rg, whose first row is the file's row first.
// The list columns (the events, most of the work) each decode on a
// goroutine of their own, beside the scalar columns on the caller's: each
// writes only its own buffer, and the column chunks are read
// independently.
func (g *rowGroup) read(rg parquet.RowGroup, first int64) error {
	g.rows = int(rg.NumRows())
	cc := rg.ColumnChunks()
	errs := make([]error, len(g.cols))
	var wg sync.WaitGroup
	for k, c := range g.cols {
		switch {
		case c.idx < 0:
		case c.kind == kListInt64 || c.kind == kListInt32:
			wg.Go(func() { errs[k] = g.readColumn(k, cc[c.idx]) })
		default:
			errs[k] = g.readColumn(k, cc[c.idx])
		}
	}
	wg.Wait()
	for _, err := range errs { // the first in column order, as one goroutine would find it
		if err != nil {
			return err
		}
	}
	return g.absolute(first)
}

// readColumn decodes column k of the row group from its chunk. A list
// column uses no scratch of g's, so lists may decode concurrently with the
// other columns.
func (g *rowGroup) readColumn(k int, chunk parquet.ColumnChunk) error {
	c, b := g.cols[k], &g.bufs[k]
	var err error
	n := 0
	switch c.kind {
	case kString:
		err = g.readStrings(chunk, &b.str)
		n = len(b.str)
	case kInt32:
		b.i32, err = readInts(g, chunk, b.i32[:0], int32Elems)
		n = len(b.i32)
	case kInt64:
		b.i64, err = readInts(g, chunk, b.i64[:0], int64Elems)
		n = len(b.i64)
	case kBool:
		b.bool = b.bool[:0]
		err = g.readScalars(chunk, func(v parquet.Value) { b.bool = append(b.bool, v.Boolean()) })
		n = len(b.bool)
	case kListInt64:
		e := int64Elems
		if c.events && g.layout == eventsGapUs {
			e = doubleBitsElems
		}
		b.i64, b.offs, err = readList(chunk, b.i64[:0], b.offs[:0], e)
		n = len(b.offs) - 1
	case kListInt32:
		b.i32, b.offs, err = readList(chunk, b.i32[:0], b.offs[:0], int32Elems)
		n = len(b.offs) - 1
	}
	if err != nil {
		return fmt.Errorf("column %s: %w", c.name, err)
	}
	if n != g.rows {
		return fmt.Errorf("column %s holds %d rows, the row group %d", c.name, n, g.rows)
	}
	return nil
}

// absolute turns the event lists decoded, in the file's layout, into
// run-relative times: each row's from its sent_ns. A value of DOUBLE that
// is not a whole number of microseconds is an error naming its row (first
// is the row group's first row in the file).
func (g *rowGroup) absolute(first int64) error {
	ev, sent := -1, -1
	for k, c := range g.cols {
		switch {
		case c.events && c.idx >= 0:
			ev = k
		case c.name == "sent_ns" && c.idx >= 0:
			sent = k
		}
	}
	if ev < 0 {
		return nil
	}
	b := &g.bufs[ev]
	var sents []int64
	if sent >= 0 {
		sents = g.bufs[sent].i64
	}
	for i := range g.rows {
		t := int64(0) // a file without sent_ns: gaps from 0, as the row reader reads it
		if sents != nil {
			t = sents[i]
		}
		if err := g.layout.absolute(b.i64[b.offs[i]:b.offs[i+1]], t); err != nil {
			return fmt.Errorf("row %d: %w", first+int64(i), err)
		}
	}
	return nil
}

// record sets rec to row i: the scanned columns, every other field zero.
// Its lists alias the row group's buffers, valid until the next read.
func (g *rowGroup) record(i int, rec *Record) {
	*rec = Record{}
	p := unsafe.Pointer(rec)
	for k := range g.cols {
		c, b := &g.cols[k], &g.bufs[k]
		if c.idx < 0 || c.hidden {
			continue
		}
		at := unsafe.Add(p, c.off) // the offset reflection gave for this field of Record
		switch c.kind {
		case kString:
			*(*string)(at) = b.str[i]
		case kInt32:
			*(*int32)(at) = b.i32[i]
		case kInt64:
			*(*int64)(at) = b.i64[i]
		case kBool:
			*(*bool)(at) = b.bool[i]
		case kListInt64:
			*(*[]int64)(at) = b.i64[b.offs[i]:b.offs[i+1]:b.offs[i+1]]
		case kListInt32:
			*(*[]int32)(at) = b.i32[b.offs[i]:b.offs[i+1]:b.offs[i+1]]
		}
	}
}

// eachPage calls fn with every page of a column chunk, releasing each
// after use.
func eachPage(cc parquet.ColumnChunk, fn func(parquet.Page) error) error {
	pages := cc.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		err = fn(p)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

// eachValue calls fn with every value of a page, through a reused buffer
// (any encoding, dictionaries included).
func (g *rowGroup) eachValue(p parquet.Page, fn func(parquet.Value)) error {
	if g.vals == nil {
		g.vals = make([]parquet.Value, 1024)
	}
	r := p.Values()
	for {
		n, err := r.ReadValues(g.vals)
		for _, v := range g.vals[:n] {
			if v.IsNull() {
				return fmt.Errorf("null value in a required column")
			}
			fn(v)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readScalars decodes a required scalar column.
func (g *rowGroup) readScalars(cc parquet.ColumnChunk, add func(parquet.Value)) error {
	return eachPage(cc, func(p parquet.Page) error { return g.eachValue(p, add) })
}

// readInts decodes a required integer column: a page's decoded values
// in place (as readList does), value by value for dictionary indexes.
func readInts[T int64 | int32](g *rowGroup, cc parquet.ColumnChunk, vals []T, e listElem[T]) ([]T, error) {
	err := eachPage(cc, func(p parquet.Page) error {
		if data, ok := e.direct(p); ok && int64(len(data)) == p.NumValues() {
			vals = append(vals, data...)
			return nil
		}
		return g.eachValue(p, func(v parquet.Value) { vals = append(vals, e.value(v)) })
	})
	return vals, err
}

// readStrings decodes a required string column, one allocation per page:
// the page's strings are copied into one string and sliced.
func (g *rowGroup) readStrings(cc parquet.ColumnChunk, dst *[]string) error {
	*dst = (*dst)[:0]
	return eachPage(cc, func(p parquet.Page) error {
		g.bytes, g.strEnds = g.bytes[:0], g.strEnds[:0]
		if err := g.eachValue(p, func(v parquet.Value) {
			g.bytes = append(g.bytes, v.ByteArray()...)
			g.strEnds = append(g.strEnds, len(g.bytes))
		}); err != nil {
			return err
		}
		all, start := string(g.bytes), 0
		for _, end := range g.strEnds {
			*dst = append(*dst, all[start:end])
			start = end
		}
		return nil
	})
}

// listElem is how readList and readInts get one element type: in place
// from a page whose data is plain (ok false for dictionary indexes), else
// value by value.
type listElem[T int64 | int32] struct {
	direct func(parquet.Page) (data []T, ok bool)
	value  func(parquet.Value) T
}

// plainElems is the listElem of T whose plain values data takes from a
// page's data.
func plainElems[T int64 | int32](data func(*encoding.Values) []T, value func(parquet.Value) T) listElem[T] {
	return listElem[T]{
		direct: func(p parquet.Page) ([]T, bool) {
			if p.Dictionary() != nil {
				return nil, false
			}
			d := p.Data()
			return data(&d), true
		},
		value: value,
	}
}

var (
	int64Elems = plainElems((*encoding.Values).Int64, parquet.Value.Int64)
	int32Elems = plainElems((*encoding.Values).Int32, parquet.Value.Int32)
	// doubleBitsElems reads a list of DOUBLE as its values' bits, for
	// eventLayout.absolute.
	doubleBitsElems = plainElems(func(v *encoding.Values) []int64 { return doubleBits(v.Double()) },
		func(v parquet.Value) int64 { return int64(math.Float64bits(v.Double())) })
)

// readList decodes a list column (max repetition and definition level 1)
// into flat values and per-row start offsets, closed by a final offset:
// a level with repetition 0 starts a row; one with definition 1 carries a
// value (definition 0 is an empty list).
func readList[T int64 | int32](cc parquet.ColumnChunk, vals []T, offs []int, e listElem[T]) ([]T, []int, error) {
	vals = hugepage.Grow(vals, int(cc.NumValues())) // levels: an upper bound of the values
	err := eachPage(cc, func(p parquet.Page) error {
		rep, def := p.RepetitionLevels(), p.DefinitionLevels()
		if len(rep) != len(def) {
			return fmt.Errorf("page has %d repetition but %d definition levels", len(rep), len(def))
		}
		base := len(vals)
		if data, ok := e.direct(p); ok {
			vals = append(vals, data...)
		} else {
			var g rowGroup
			if err := g.eachValue(nullable(p), func(v parquet.Value) { vals = append(vals, e.value(v)) }); err != nil {
				return err
			}
		}
		k := base
		for j, r := range rep {
			if r == 0 {
				offs = append(offs, k)
			}
			k += int(def[j])
		}
		if k != len(vals) {
			return fmt.Errorf("page has %d defined levels but %d values", k-base, len(vals)-base)
		}
		return nil
	})
	if len(offs) == 0 && len(vals) > 0 {
		return vals, offs, fmt.Errorf("values before the first row")
	}
	return vals, append(offs, len(vals)), err
}

// nullable wraps a page so eachValue skips its nulls (empty lists) rather
// than rejecting them.
func nullable(p parquet.Page) parquet.Page { return nonNullPage{p} }

type nonNullPage struct{ parquet.Page }

func (p nonNullPage) Values() parquet.ValueReader { return nonNullValues{p.Page.Values()} }

type nonNullValues struct{ r parquet.ValueReader }

func (v nonNullValues) ReadValues(buf []parquet.Value) (int, error) {
	for {
		n, err := v.r.ReadValues(buf)
		k := 0
		for _, x := range buf[:n] {
			if !x.IsNull() {
				buf[k] = x
				k++
			}
		}
		if k > 0 || err != nil {
			return k, err
		}
	}
}

// openColumns opens path's Parquet structure for column reading (the file
// was already validated by OpenRecording).
func openColumns(path string) (*os.File, *parquet.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a readable Parquet file: %w", path, err)
	}
	return f, pf, nil
}

// HasColumn reports whether the file holds the named column. A recording
// written before a column existed reads it as zero; HasColumn tells that
// zero apart from a written one (reasoning_tokens: 0 reported, or never
// recorded).
func (s *RecordScanner) HasColumn(name string) bool {
	_, ok := s.r.r.pf.Schema().Lookup(name)
	return ok
}
