package trace

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// randomRecords builds n records with every field set, some lists empty.
func randomRecords(r *rand.Rand, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		ne := r.IntN(6)
		rec := Record{RequestID: fmt.Sprint("r", i), ConversationID: fmt.Sprint("c", r.IntN(50)), Turn: int32(r.IntN(5)),
			Shard: int32(r.IntN(3)), Attempt: int32(r.IntN(2)), Warmup: r.IntN(5) == 0, Target: "http://t" + fmt.Sprint(r.IntN(2)),
			IntendedNs: r.Int64N(1e10), SlotNs: r.Int64N(1e10), SentNs: r.Int64N(1e10), DoneNs: r.Int64N(1e10),
			Status: int32(200 + r.IntN(2)*303), ErrorKind: []ErrorKind{"", ErrTimeout, ErrHTTPStatus}[r.IntN(3)],
			ErrorMessage: strings.Repeat("x", r.IntN(4)), InputTokens: r.Int32N(999), MaxTokens: r.Int32N(999),
			PromptTokens: r.Int32N(999) - 1, CompletionTokens: r.Int32N(999) - 1, CachedTokens: r.Int32N(9) - 1,
			TokensExact: r.IntN(2) == 0, NonStreaming: r.IntN(4) == 0, EventNs: []int64{}, EventTokens: []int32{}, Parents: []int32{}, After: []int32{}}
		if r.IntN(3) == 0 {
			rec.Parents = append(rec.Parents, RootParent, r.Int32N(4))
			if r.IntN(2) == 0 {
				rec.After = append(rec.After, r.Int32N(4))
			}
			rec.ToolCalls, rec.ToolCallMismatch = r.Int32N(3), r.IntN(2) == 0
		}
		if r.IntN(2) == 0 {
			rec.HeadersNs = r.Int64N(1e10)
		}
		for range ne {
			rec.EventNs = append(rec.EventNs, r.Int64N(1e10))
			rec.EventTokens = append(rec.EventTokens, r.Int32N(5))
		}
		recs[i] = rec
	}
	return recs
}

func writeRecords(t testing.TB, path string, recs []Record) {
	t.Helper()
	w, err := NewRecordWriter(path, RunMeta{StartWallNs: 42})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(recs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// scanAll returns copies of every scanned row (lists included, since the
// scanner reuses its buffers).
func scanAll(t *testing.T, path string, opts ScanOptions) []Record {
	t.Helper()
	s, err := OpenScanner(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []Record
	if err := s.Scan(func(row int64, r *Record) error {
		if row != int64(len(out)) {
			t.Fatalf("row %d given as %d", len(out), row)
		}
		c := *r
		c.EventNs, c.EventTokens, c.Parents, c.After = slices.Clone(r.EventNs), slices.Clone(r.EventTokens), slices.Clone(r.Parents), slices.Clone(r.After)
		if c.Parents == nil {
			c.Parents = []int32{}
		}
		if c.After == nil {
			c.After = []int32{}
		}
		if c.EventNs == nil {
			c.EventNs = []int64{}
		}
		if c.EventTokens == nil {
			c.EventTokens = []int32{}
		}
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The column scanner gives what the row reader gives, over row-group
// boundaries; asked for some columns it leaves the others zero.
func TestScanMatchesRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.parquet")
	want := randomRecords(rand.New(rand.NewPCG(1, 2)), RowGroupRows+333)
	writeRecords(t, path, want)
	s, err := OpenScanner(path, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.pf == nil {
		t.Fatal("a recording of this build must take the column path")
	}
	s.Close()
	want = rounded(want) // the event times as a recording keeps them
	for _, opts := range []ScanOptions{{}, {Rows: true}} {
		got := scanAll(t, path, opts)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rows %v: scanned records differ from those written", opts.Rows)
		}
	}
	got := scanAll(t, path, ScanOptions{Columns: []string{"request_id", "event_gap_us"}})
	for i := range got {
		if got[i].RequestID != want[i].RequestID || !slices.Equal(got[i].EventNs, want[i].EventNs) || got[i].SentNs != 0 || len(got[i].EventTokens) != 0 {
			t.Fatalf("row %d: %+v", i, got[i])
		}
	}
	if _, err := OpenScanner(path, ScanOptions{Columns: []string{"ttft"}}); err == nil || !strings.Contains(err.Error(), `"ttft" is not a recording column`) {
		t.Errorf("unknown column: %v", err)
	}
}

// Scan decodes the next row group while fn reads the current one: over
// several row groups the rows still arrive whole and in order, an error
// from fn in any row group stops the scan with that error, and the
// decoding goroutine has ended when Scan returns.
func TestScanDecodesAhead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.parquet")
	want := randomRecords(rand.New(rand.NewPCG(3, 4)), 3*RowGroupRows+17)
	writeRecords(t, path, want)
	want = rounded(want) // the event times as a recording keeps them
	before := runtime.NumGoroutine()
	if got := scanAll(t, path, ScanOptions{}); !reflect.DeepEqual(got, want) {
		t.Fatal("scanned records differ from those written")
	}
	stop := errors.New("enough")
	for _, at := range []int64{0, RowGroupRows - 1, RowGroupRows, 2*RowGroupRows + 3} {
		s, err := OpenScanner(path, ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var last int64 = -1
		err = s.Scan(func(row int64, r *Record) error {
			if r.RequestID != want[row].RequestID || !slices.Equal(r.EventNs, want[row].EventNs) {
				t.Fatalf("row %d differs", row)
			}
			last = row
			if row == at {
				return stop
			}
			return nil
		})
		s.Close()
		if err != stop || last != at {
			t.Fatalf("stop at row %d: Scan returned %v after row %d", at, err, last)
		}
	}
	// The goroutines end as Scan returns; allow the runtime a moment to
	// retire them (bounded).
	for i := 0; runtime.NumGoroutine() > before; i++ {
		if i == 500 {
			t.Fatalf("%d goroutines after the scans, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dictRecord is Record with dictionary-encoded strings and event tokens,
// as another Parquet writer might produce; it lacks non_streaming, as a
// file of an older build does.
type dictRecord struct {
	RequestID        string  `parquet:"request_id,dict"`
	ConversationID   string  `parquet:"conversation_id,dict"`
	Turn             int32   `parquet:"turn"`
	Shard            int32   `parquet:"shard"`
	Attempt          int32   `parquet:"attempt"`
	Warmup           bool    `parquet:"warmup"`
	Target           string  `parquet:"target,dict"`
	IntendedNs       int64   `parquet:"intended_ns"`
	SlotNs           int64   `parquet:"slot_ns"`
	SentNs           int64   `parquet:"sent_ns"`
	HeadersNs        int64   `parquet:"headers_ns"`
	DoneNs           int64   `parquet:"done_ns"`
	Status           int32   `parquet:"status,dict"`
	ErrorKind        string  `parquet:"error_kind,dict"`
	ErrorMessage     string  `parquet:"error_message"`
	InputTokens      int32   `parquet:"input_tokens"`
	MaxTokens        int32   `parquet:"max_tokens"`
	PromptTokens     int32   `parquet:"prompt_tokens"`
	CompletionTokens int32   `parquet:"completion_tokens"`
	CachedTokens     int32   `parquet:"cached_tokens"`
	TokensExact      bool    `parquet:"tokens_exact"`
	EventNs          []int64 `parquet:"event_ns,list"`
	EventTokens      []int32 `parquet:"event_tokens,list" parquet-element:",dict"`
}

// optionalTarget has an optional column, which the column path does not
// decode: rows go through the generic reader.
type optionalTarget struct {
	RequestID   string  `parquet:"request_id"`
	Target      *string `parquet:"target,optional"`
	SentNs      int64   `parquet:"sent_ns"`
	EventNs     []int64 `parquet:"event_ns,list"`
	EventTokens []int32 `parquet:"event_tokens,list"`
}

func writeOther[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f, parquet.KeyValueMetadata(MetaFormat, FormatRecording),
		parquet.KeyValueMetadata(MetaSchemaVersion, "1"), parquet.MaxRowsPerRowGroup(700))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// Dictionary pages decode value by value, a missing column reads as zero
// on the column path, an optional one sends rows through the generic
// reader; all agree with the generic reader.
func TestScanOtherEncodings(t *testing.T) {
	dir := t.TempDir()
	recs := randomRecords(rand.New(rand.NewPCG(5, 5)), 2000)
	var dict []dictRecord
	var opt []optionalTarget
	for _, x := range recs {
		dict = append(dict, dictRecord{RequestID: x.RequestID, ConversationID: x.ConversationID, Turn: x.Turn, Warmup: x.Warmup,
			IntendedNs: x.IntendedNs, SlotNs: x.SlotNs, SentNs: x.SentNs, DoneNs: x.DoneNs, Status: x.Status,
			ErrorKind: string(x.ErrorKind), InputTokens: x.InputTokens, PromptTokens: x.PromptTokens,
			CompletionTokens: x.CompletionTokens, CachedTokens: x.CachedTokens, EventNs: x.EventNs, EventTokens: x.EventTokens})
		opt = append(opt, optionalTarget{RequestID: x.RequestID, Target: &x.Target, SentNs: x.SentNs, EventNs: x.EventNs, EventTokens: x.EventTokens})
	}
	pd, po := filepath.Join(dir, "dict.parquet"), filepath.Join(dir, "opt.parquet")
	writeOther(t, pd, dict)
	writeOther(t, po, opt)
	for _, c := range []struct {
		path    string
		columns bool
	}{{pd, true}, {po, false}} {
		s, err := OpenScanner(c.path, ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if (s.pf != nil) != c.columns {
			t.Errorf("%s: column path %v, want %v", c.path, s.pf != nil, c.columns)
		}
		s.Close()
		got, want := scanAll(t, c.path, ScanOptions{}), scanAll(t, c.path, ScanOptions{Rows: true})
		if len(got) != len(recs) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: column scan differs from the row reader", c.path)
		}
	}
}

// Shift moves every _ns time (the event list too) and leaves an unset
// headers_ns at 0.
func TestShift(t *testing.T) {
	r := Record{IntendedNs: 1, SlotNs: 2, SentNs: 3, HeadersNs: 0, DoneNs: 5, EventNs: []int64{6, 7}, Turn: 9}
	r.Shift(100)
	want := Record{IntendedNs: 101, SlotNs: 102, SentNs: 103, HeadersNs: 0, DoneNs: 105, EventNs: []int64{106, 107}, Turn: 9}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("shifted %+v, want %+v", r, want)
	}
	r.HeadersNs = 4
	r.Shift(-100)
	if r.HeadersNs != -96 || r.IntendedNs != 1 {
		t.Fatalf("%+v", r)
	}
}
