package analyze

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/tracekit/tracekit/trace"
)

// sameSummary fails unless the two summaries are identical, requests and
// samples included.
func sameSummary(t *testing.T, tag string, got, want *Summary) {
	t.Helper()
	if !reflect.DeepEqual(got.JSON(true), want.JSON(true)) {
		t.Errorf("%s: JSON differs", tag)
	}
	if !reflect.DeepEqual(got.Reqs, want.Reqs) || !reflect.DeepEqual(got.eventTimes, want.eventTimes) {
		t.Errorf("%s: requests or event times differ", tag)
	}
}

// TestColumnsMatchRows: the column reader gives exactly what parquet-go's
// generic row reader gives, over row-group boundaries, shards with offsets,
// warm-up, windows and the histogram switch.
func TestColumnsMatchRows(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 3))
	var paths []string
	for k := range 3 {
		var recs []trace.Record
		for len(recs) < []int{5000, 30, 4096}[k] {
			recs = append(recs, randomRecords(r)...)
		}
		meta := trace.RunMeta{StartWallNs: 1e18 + int64(k)*777_000_001}
		paths = append(paths, writeRecording(t, dir, fmt.Sprintf("s%d.parquet", k), meta, recs))
	}
	for i, o := range []Options{
		{},
		{IncludeWarmup: true, ITL: ITLPerToken, Percentiles: []float64{50, 90, 99}},
		{Window: Window{FromNs: 2e9, ToNs: 9e9}, MaxExactSamples: 2000},
	} {
		for _, ps := range [][]string{paths[:1], paths} {
			tag := fmt.Sprintf("options %d, %d files", i, len(ps))
			got, err := files(ps, o, true)
			if err != nil {
				t.Fatalf("%s: %v", tag, err)
			}
			want, err := files(ps, o, false)
			if err != nil {
				t.Fatalf("%s: %v", tag, err)
			}
			if got.Requests == 0 || got.Completed == 0 {
				t.Fatalf("%s: nothing analyzed", tag)
			}
			sameSummary(t, tag, got, want)
		}
	}
}

// dictRecord is trace.Record with dictionary-encoded strings and event
// tokens, as another Parquet writer might produce.
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

// noTarget lacks a column analyze reads, so the row reader takes over.
type noTarget struct {
	RequestID   string  `parquet:"request_id"`
	SentNs      int64   `parquet:"sent_ns"`
	DoneNs      int64   `parquet:"done_ns"`
	Status      int32   `parquet:"status"`
	EventNs     []int64 `parquet:"event_ns,list"`
	EventTokens []int32 `parquet:"event_tokens,list"`
}

func writeOther[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[T](f, parquet.KeyValueMetadata(trace.MetaFormat, trace.FormatRecording),
		parquet.KeyValueMetadata(trace.MetaSchemaVersion, "1"), parquet.MaxRowsPerRowGroup(700))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestColumnsOtherEncodings: dictionary pages are decoded value by value,
// and a file without some column falls back to the row reader; both agree
// with the row reader.
func TestColumnsOtherEncodings(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 5))
	var recs []trace.Record
	for len(recs) < 2000 {
		recs = append(recs, randomRecords(r)...)
	}
	var dict []dictRecord
	var short []noTarget
	for _, x := range recs {
		dict = append(dict, dictRecord{RequestID: x.RequestID, ConversationID: x.ConversationID, Turn: x.Turn, Warmup: x.Warmup,
			IntendedNs: x.IntendedNs, SlotNs: x.SlotNs, SentNs: x.SentNs, DoneNs: x.DoneNs, Status: x.Status,
			ErrorKind: x.ErrorKind, InputTokens: x.InputTokens, PromptTokens: x.PromptTokens,
			CompletionTokens: x.CompletionTokens, CachedTokens: x.CachedTokens, EventNs: x.EventNs, EventTokens: x.EventTokens})
		short = append(short, noTarget{RequestID: x.RequestID, SentNs: x.SentNs, DoneNs: x.DoneNs, Status: x.Status,
			EventNs: x.EventNs, EventTokens: x.EventTokens})
	}
	pd, ps := filepath.Join(dir, "dict.parquet"), filepath.Join(dir, "short.parquet")
	writeOther(t, pd, dict)
	writeOther(t, ps, short)
	f, err := os.Open(pd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := newLayout(pf.Schema()); !ok {
		t.Fatal("the dictionary file's schema should take the column path")
	}
	for _, p := range []string{pd, ps} {
		got, err := files([]string{p}, Options{}, true)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want, err := files([]string{p}, Options{}, false)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got.Completed == 0 {
			t.Fatalf("%s: nothing analyzed", p)
		}
		sameSummary(t, p, got, want)
	}
}
