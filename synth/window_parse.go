package synth

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// RowError is a malformed line or row of an imported trace file. Line is
// 1-based and counts the header of a CSV file.
type RowError struct {
	File  string
	Line  int
	Field string // the column or JSON field at fault; empty for the whole line
	Err   error
}

func (e *RowError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s line %d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s line %d: field %q: %v", e.File, e.Line, e.Field, e.Err)
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
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", path, err)
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
	f    *os.File
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
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
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

// parseDecimalNs parses a non-negative decimal number of units ("12",
// "12.5", "1.25e3" is refused) into nanoseconds exactly: unitNs is the
// number of ns in one unit (1e9 for seconds, 1e6 for milliseconds).
// Fraction digits beyond ns resolution are truncated, never rounded through
// a float.
func parseDecimalNs(s string, unitNs int64) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty, expected a number")
	}
	neg := false
	if s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	var whole int64
	if intPart != "" {
		v, err := strconv.ParseInt(intPart, 10, 64)
		if err != nil || intPart[0] == '+' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
		whole = v
	}
	if whole > (1<<62)/unitNs {
		return 0, fmt.Errorf("%q is too large", s)
	}
	ns := whole * unitNs
	// Each fraction digit is worth unitNs/10^k ns; stop once that is < 1 ns.
	step := unitNs
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
		step /= 10
		ns += int64(c-'0') * step
	}
	if neg {
		ns = -ns
	}
	return ns, nil
}

// parseCount parses a non-negative integer token count; "12.0" is accepted
// because some CSV exports write integers as floats.
func parseCount(s string) (int, error) {
	s = strings.TrimSpace(s)
	if whole, frac, ok := strings.Cut(s, "."); ok && strings.Trim(frac, "0") == "" {
		s = whole
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a token count", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%d is negative", v)
	}
	return int(v), nil
}

// parseWallNs parses an Azure timestamp to unix nanoseconds exactly:
// "2023-11-16 18:15:46.6805900" (2023: 7 fraction digits, no zone, taken as
// UTC), "2024-05-10 00:00:00.010419+00:00" and "2024-05-10 00:00:01+00:00"
// (2024: zone suffix, fraction sometimes absent). A 'T' separator and a 'Z'
// suffix are accepted too.
func parseWallNs(s string) (int64, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("%q is not a timestamp YYYY-MM-DD hh:mm:ss[.fraction][+hh:mm]: %s", s, why)
	}
	if len(s) < 19 || (s[10] != ' ' && s[10] != 'T') {
		return bad("too short or no date/time separator")
	}
	base, err := time.Parse("2006-01-02 15:04:05", s[:10]+" "+s[11:19])
	if err != nil {
		return bad(err.Error())
	}
	rest := s[19:]
	var frac int64
	if strings.HasPrefix(rest, ".") {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 {
			return bad("empty fraction")
		}
		digits := rest[1:i]
		if len(digits) > 9 {
			digits = digits[:9]
		}
		frac, _ = strconv.ParseInt(digits+strings.Repeat("0", 9-len(digits)), 10, 64)
		rest = rest[i:]
	}
	var zone int64
	switch {
	case rest == "" || rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		hh, err1 := strconv.Atoi(rest[1:3])
		mm, err2 := strconv.Atoi(rest[4:6])
		if err1 != nil || err2 != nil {
			return bad("zone offset is not +hh:mm")
		}
		zone = int64(hh*3600+mm*60) * int64(time.Second)
		if rest[0] == '-' {
			zone = -zone
		}
	default:
		return bad(fmt.Sprintf("unexpected %q after the seconds", rest))
	}
	return base.UnixNano() + frac - zone, nil
}
