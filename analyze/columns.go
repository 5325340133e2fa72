package analyze

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
)

// Column decoding. parquet-go's GenericReader[trace.Record] rebuilds every
// row through reflection and copies its lists, which costs several times
// the analysis itself. The recording is read here instead column by column,
// one row group at a time, into flat buffers reused from row group to row
// group: only the columns Derive needs, the event lists straight from the
// pages' decoded values with row boundaries from the repetition levels.
// Memory stays bounded by one row group (trace.RowGroupRows rows).

// Columns read, by kind. The strings are per row, so each is one
// allocation per page (see readStrings).
var (
	strColumns = [...]string{"request_id", "conversation_id", "target", "error_kind", "error_message"}
	i32Columns = [...]string{"turn", "shard", "attempt", "status", "input_tokens", "prompt_tokens", "completion_tokens", "cached_tokens"}
	i64Columns = [...]string{"intended_ns", "slot_ns", "sent_ns", "headers_ns", "done_ns"}
)

const (
	cRequestID = iota
	cConversationID
	cTarget
	cErrorKind
	cErrorMessage
)

const (
	cTurn = iota
	cShard
	cAttempt
	cStatus
	cInputTokens
	cPromptTokens
	cCompletionTokens
	cCachedTokens
)

const (
	cIntended = iota
	cSlot
	cSent
	cHeaders
	cDone
)

// layout is where the columns analyze reads sit in one file's schema.
type layout struct {
	str            [len(strColumns)]int
	i32            [len(i32Columns)]int
	i64            [len(i64Columns)]int
	warmup         int
	evNs, evTokens int
}

// newLayout finds the columns; ok is false when the schema is not the one
// trace.Record writes (a column missing, optional, or of another type), in
// which case the caller reads rows through parquet-go's generic reader.
func newLayout(s *parquet.Schema) (l layout, ok bool) {
	find := func(kind parquet.Kind, rep int, path ...string) (int, bool) {
		c, found := s.Lookup(path...)
		if !found || c.Node.Type().Kind() != kind || c.MaxRepetitionLevel != rep || c.MaxDefinitionLevel != rep {
			return 0, false
		}
		return c.ColumnIndex, true
	}
	ok = true
	set := func(dst *int, kind parquet.Kind, rep int, path ...string) {
		i, found := find(kind, rep, path...)
		*dst, ok = i, ok && found
	}
	for i, n := range strColumns {
		set(&l.str[i], parquet.ByteArray, 0, n)
	}
	for i, n := range i32Columns {
		set(&l.i32[i], parquet.Int32, 0, n)
	}
	for i, n := range i64Columns {
		set(&l.i64[i], parquet.Int64, 0, n)
	}
	set(&l.warmup, parquet.Boolean, 0, "warmup")
	set(&l.evNs, parquet.Int64, 1, "event_ns", "list", "element")
	set(&l.evTokens, parquet.Int32, 1, "event_tokens", "list", "element")
	return l, ok
}

// rowGroup is one row group's decoded columns. Row i's events are
// evNs[nsOff[i]:nsOff[i+1]] and evTokens[tokOff[i]:tokOff[i+1]] (the two
// lists may differ in length; validate reports it).
type rowGroup struct {
	rows          int
	str           [len(strColumns)][]string
	i32           [len(i32Columns)][]int32
	i64           [len(i64Columns)][]int64
	warmup        []bool
	evNs          []int64
	evTokens      []int32
	nsOff, tokOff []int
	vals          []parquet.Value // scratch for scalar pages
	bytes         []byte          // scratch for string pages
	strEnds       []int
}

// read decodes row group rg of a file with layout l.
func (g *rowGroup) read(rg parquet.RowGroup, l *layout) error {
	g.rows = int(rg.NumRows())
	cc := rg.ColumnChunks()
	for i, c := range l.str {
		if err := g.readStrings(cc[c], &g.str[i]); err != nil {
			return columnErr(strColumns[i], err)
		}
	}
	for i, c := range l.i32 {
		if err := g.readScalars(cc[c], func(v parquet.Value) { g.i32[i] = append(g.i32[i], v.Int32()) }, func() { g.i32[i] = g.i32[i][:0] }); err != nil {
			return columnErr(i32Columns[i], err)
		}
		if err := g.checkRows(i32Columns[i], len(g.i32[i])); err != nil {
			return err
		}
	}
	for i, c := range l.i64 {
		if err := g.readScalars(cc[c], func(v parquet.Value) { g.i64[i] = append(g.i64[i], v.Int64()) }, func() { g.i64[i] = g.i64[i][:0] }); err != nil {
			return columnErr(i64Columns[i], err)
		}
		if err := g.checkRows(i64Columns[i], len(g.i64[i])); err != nil {
			return err
		}
	}
	if err := g.readScalars(cc[l.warmup], func(v parquet.Value) { g.warmup = append(g.warmup, v.Boolean()) }, func() { g.warmup = g.warmup[:0] }); err != nil {
		return columnErr("warmup", err)
	}
	if err := g.checkRows("warmup", len(g.warmup)); err != nil {
		return err
	}
	for i := range g.str {
		if err := g.checkRows(strColumns[i], len(g.str[i])); err != nil {
			return err
		}
	}
	var err error
	if g.evNs, g.nsOff, err = readList(cc[l.evNs], g.evNs[:0], g.nsOff[:0], int64Elems); err != nil {
		return columnErr("event_ns", err)
	}
	if err := g.checkRows("event_ns", len(g.nsOff)-1); err != nil {
		return err
	}
	if g.evTokens, g.tokOff, err = readList(cc[l.evTokens], g.evTokens[:0], g.tokOff[:0], int32Elems); err != nil {
		return columnErr("event_tokens", err)
	}
	return g.checkRows("event_tokens", len(g.tokOff)-1)
}

func columnErr(name string, err error) error {
	return fmt.Errorf("column %s: %w", name, err)
}

func (g *rowGroup) checkRows(name string, n int) error {
	if n != g.rows {
		return fmt.Errorf("column %s holds %d rows, the row group %d", name, n, g.rows)
	}
	return nil
}

// record fills rec with row i. Its lists alias the row group's buffers,
// valid until the next read.
func (g *rowGroup) record(i int, rec *trace.Record) {
	*rec = trace.Record{
		RequestID: g.str[cRequestID][i], ConversationID: g.str[cConversationID][i], Target: g.str[cTarget][i],
		ErrorKind: g.str[cErrorKind][i], ErrorMessage: g.str[cErrorMessage][i],
		Turn: g.i32[cTurn][i], Shard: g.i32[cShard][i], Attempt: g.i32[cAttempt][i], Status: g.i32[cStatus][i],
		InputTokens: g.i32[cInputTokens][i], PromptTokens: g.i32[cPromptTokens][i],
		CompletionTokens: g.i32[cCompletionTokens][i], CachedTokens: g.i32[cCachedTokens][i],
		Warmup:     g.warmup[i],
		IntendedNs: g.i64[cIntended][i], SlotNs: g.i64[cSlot][i], SentNs: g.i64[cSent][i],
		HeadersNs: g.i64[cHeaders][i], DoneNs: g.i64[cDone][i],
		EventNs:     g.evNs[g.nsOff[i]:g.nsOff[i+1]:g.nsOff[i+1]],
		EventTokens: g.evTokens[g.tokOff[i]:g.tokOff[i+1]:g.tokOff[i+1]],
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

// readScalars decodes a required scalar column; reset empties the target.
func (g *rowGroup) readScalars(cc parquet.ColumnChunk, add func(parquet.Value), reset func()) error {
	reset()
	return eachPage(cc, func(p parquet.Page) error { return g.eachValue(p, add) })
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

// listElem is how readList gets one element type: in place from a page
// whose data is plain (ok false for dictionary indexes), else value by value.
type listElem[T int64 | int32] struct {
	direct func(parquet.Page) (data []T, ok bool)
	value  func(parquet.Value) T
}

var (
	int64Elems = listElem[int64]{
		direct: func(p parquet.Page) ([]int64, bool) {
			if p.Dictionary() != nil {
				return nil, false
			}
			d := p.Data()
			return d.Int64(), true
		},
		value: parquet.Value.Int64,
	}
	int32Elems = listElem[int32]{
		direct: func(p parquet.Page) ([]int32, bool) {
			if p.Dictionary() != nil {
				return nil, false
			}
			d := p.Data()
			return d.Int32(), true
		},
		value: parquet.Value.Int32,
	}
)

// readList decodes a list column (max repetition and definition level 1)
// into flat values and per-row start offsets, closed by a final offset:
// a level with repetition 0 starts a row; one with definition 1 carries a
// value (definition 0 is an empty list).
func readList[T int64 | int32](cc parquet.ColumnChunk, vals []T, offs []int, e listElem[T]) ([]T, []int, error) {
	vals = slices.Grow(vals, int(cc.NumValues())) // levels: an upper bound of the values
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
// was already validated by trace.OpenRecording).
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
