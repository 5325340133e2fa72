package synth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// RowError is a malformed line or row of an input file. Line is 1-based
// and counts the header of a CSV file; Column, 1-based, is 0 when unknown.
type RowError struct {
	File   string
	Line   int
	Column int
	Field  string // the column or JSON field at fault; empty for the whole line
	Err    error
}

func (e *RowError) Error() string {
	loc := fmt.Sprintf("%s line %d", e.File, e.Line)
	if e.Column > 0 {
		loc += fmt.Sprintf(", column %d", e.Column)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", loc, e.Err)
	}
	return fmt.Sprintf("%s: field %q: %v", loc, e.Field, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// badRows decides what a malformed row does: fail the import, or (with
// --skip-bad) be counted and skipped. The first few skipped errors are kept
// for the report.
type badRows struct {
	skip  bool
	count int
	first []string
}

const keepBadExamples = 3

// add returns err itself when bad rows are fatal, nil when it was skipped.
func (b *badRows) add(err *RowError) error {
	if !b.skip {
		return err
	}
	b.count++
	if len(b.first) < keepBadExamples {
		b.first = append(b.first, err.Error())
	}
	return nil
}

// maxLineBytes bounds one JSONL line (a Bailian line with thousands of
// 16-token hash ids is a few hundred KiB).
const maxLineBytes = 64 << 20

// eachLine calls fn with every non-blank line of path and its 1-based line
// number, and returns the count of bytes read that are not UTF-8. A
// trailing CR is removed, so CRLF files read like LF files.
func eachLine(path string, fn func(line int, text []byte) error) (invalidUTF8 int64, err error) {
	f, err := OpenInput(path, nil)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	u := &utf8Counter{r: f}
	sc := bufio.NewScanner(u)
	sc.Buffer(make([]byte, 0, 1<<20), maxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		b := sc.Bytes()
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if err := fn(n, b); err != nil {
			return u.Invalid(), err
		}
	}
	if err := sc.Err(); err != nil {
		return u.Invalid(), fmt.Errorf("reading %s after line %d: %w", path, n, err)
	}
	return u.Invalid(), nil
}

// csvTable reads a CSV file whose columns are found by header name.
type csvTable struct {
	path string
	r    *csv.Reader
	f    *Input
	utf8 *utf8Counter
	col  map[string]int // normalized header name -> index
	// width is the header's field count; every row must have as many.
	width int
}

// normColumn folds a header name so that "Session ID", "SessionID" and
// "session_id" are one column.
func normColumn(s string) string {
	s = strings.TrimPrefix(s, "\ufeff")
	r := strings.NewReplacer(" ", "", "_", "", "-", "")
	return strings.ToLower(r.Replace(strings.TrimSpace(s)))
}

func openCSV(path string) (*csvTable, error) {
	f, err := OpenInput(path, nil)
	if err != nil {
		return nil, err
	}
	u := &utf8Counter{r: f}
	r := csv.NewReader(bufio.NewReaderSize(u, 1<<20))
	r.ReuseRecord = true
	r.FieldsPerRecord = -1 // checked per row, with the row's line in the error
	head, err := r.Read()
	if err != nil {
		f.Close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading %s: empty file, expected a CSV header", path)
		}
		return nil, fmt.Errorf("reading the header of %s: %w", path, err)
	}
	t := &csvTable{path: path, r: r, f: f, utf8: u, col: map[string]int{}, width: len(head)}
	for i, h := range head {
		t.col[normColumn(h)] = i
	}
	return t, nil
}

// need returns the index of a required column.
func (t *csvTable) need(name string) (int, error) {
	i, ok := t.col[normColumn(name)]
	if !ok {
		return 0, fmt.Errorf("%s line 1: missing column %q in the header", t.path, name)
	}
	return i, nil
}

// optional returns the index of a column, or -1.
func (t *csvTable) optional(name string) int {
	if i, ok := t.col[normColumn(name)]; ok {
		return i
	}
	return -1
}

// next returns the next record and its line, io.EOF at the end. A row that
// CSV cannot parse comes back as a *RowError so it can be skipped.
func (t *csvTable) next() ([]string, int, error) {
	rec, err := t.r.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, pe.StartLine, &RowError{File: t.path, Line: pe.StartLine, Err: pe.Err}
		}
		if errors.Is(err, io.EOF) {
			return nil, 0, io.EOF
		}
		return nil, 0, fmt.Errorf("reading %s: %w", t.path, err)
	}
	line, _ := t.r.FieldPos(0)
	if len(rec) != t.width {
		return rec, line, &RowError{File: t.path, Line: line, Err: fmt.Errorf("%d fields, the header has %d", len(rec), t.width)}
	}
	return rec, line, nil
}

// invalidUTF8 counts the bytes read so far that are not UTF-8.
func (t *csvTable) invalidUTF8() int64 { return t.utf8.Invalid() }

func (t *csvTable) Close() error { return t.f.Close() }

// jsonlLengths are the fields every JSONL import (Mooncake, Bailian) has;
// pointers tell a missing field from zero.
type jsonlLengths struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	InputLength  *int            `json:"input_length"`
	OutputLength *int            `json:"output_length"`
	HashIDs      []int64         `json:"hash_ids"`
}

// decodeJSONLine decodes one line into v (numbers kept exact).
func decodeJSONLine(path string, line int, b []byte, v any) *RowError {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		f := jsonFaultOf(err)
		// A field of the embedded jsonlLengths is named with its Go type.
		f.field = strings.TrimPrefix(f.field, "jsonlLengths.")
		return f.rowError(path, b, line, f.off, "") // both kinds count from the line's start here
	}
	return nil
}

// row checks the shared fields and converts them: the timestamp is in
// units of unitNs nanoseconds (unit names it for messages).
func (l jsonlLengths) row(path string, line int, unitNs int64, unit string) (importRow, *RowError) {
	e := func(field string, err error) (importRow, *RowError) {
		return importRow{}, &RowError{File: path, Line: line, Field: field, Err: err}
	}
	switch {
	case l.Timestamp == nil || string(l.Timestamp) == "null":
		return e("timestamp", errors.New("missing"))
	case l.InputLength == nil:
		return e("input_length", errors.New("missing"))
	case l.OutputLength == nil:
		return e("output_length", errors.New("missing"))
	case *l.InputLength < 0:
		return e("input_length", fmt.Errorf("%d is negative", *l.InputLength))
	case *l.OutputLength < 0:
		return e("output_length", fmt.Errorf("%d is negative", *l.OutputLength))
	case *l.InputLength > maxTokens:
		return e("input_length", fmt.Errorf("%d is above %d", *l.InputLength, maxTokens))
	case *l.OutputLength > maxTokens:
		return e("output_length", fmt.Errorf("%d is above %d", *l.OutputLength, maxTokens))
	}
	at, err := parseDecimalNs(string(l.Timestamp), unitNs)
	if err != nil {
		return e("timestamp", fmt.Errorf("%w (%s)", err, unit))
	}
	if at < 0 {
		return e("timestamp", fmt.Errorf("%s is negative", string(l.Timestamp)))
	}
	for i, h := range l.HashIDs {
		if h < 0 {
			return e("hash_ids", fmt.Errorf("element %d is negative (%d)", i, h))
		}
	}
	return importRow{line: line, at: at, input: *l.InputLength, output: *l.OutputLength, hashes: l.HashIDs}, nil
}

// readJSONL reads an import's JSONL file: parse makes a row of each
// non-blank line, handed to use; a malformed line fails the import or, with
// SkipBad, is counted and skipped. It fills st's Rows, BadRows, BadExamples
// and InvalidUTF8.
func readJSONL[T any](ctx context.Context, o ImportOptions, st *ImportStats, parse func(line int, b []byte) (T, *RowError), use func(T) error) error {
	bad := badRows{skip: o.SkipBad}
	rows := 0
	invalid, err := eachLine(o.Path, func(line int, b []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, rerr := parse(line, b)
		if rerr != nil {
			return bad.add(rerr)
		}
		rows++
		return use(r)
	})
	st.Rows, st.BadRows, st.BadExamples, st.InvalidUTF8 = rows, bad.count, bad.first, invalid
	return err
}
