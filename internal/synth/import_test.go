package synth

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/trace"
)

// writeAndReadBack writes convs as a trace and reads every row back.
func writeAndReadBack(t *testing.T, src Source, convs []Conversation, opts map[string]string) ([]trace.Turn, trace.TraceMeta) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.parquet")
	meta := trace.TraceMeta{Source: src.Name(), Tokenizer: "o200k_base", Options: opts}
	if err := Write(context.Background(), p, false, meta, convs); err != nil {
		t.Fatal(err)
	}
	r, err := trace.OpenTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []trace.Turn
	buf := make([]trace.Turn, 256)
	for {
		n, err := r.Read(buf)
		rows = append(rows, buf[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading back after %d rows: %v", len(rows), err)
		}
	}
	if int64(len(rows)) != r.NumRows() {
		t.Fatalf("read %d rows, file has %d", len(rows), r.NumRows())
	}
	return rows, r.Meta
}

// arrivals returns every turn's arrival offset, sorted.
func arrivals(convs []Conversation) []int64 {
	var a []int64
	for _, c := range convs {
		for _, t := range c {
			a = append(a, t.ArrivalOffsetNs)
		}
	}
	slices.Sort(a)
	return a
}

// gapPercentiles returns the p50, p90 and p99 of the gaps of sorted times.
func gapPercentiles(at []int64) [3]int64 {
	if len(at) < 2 {
		return [3]int64{}
	}
	gaps := make([]int64, len(at)-1)
	for i := range gaps {
		gaps[i] = at[i+1] - at[i]
	}
	slices.Sort(gaps)
	pick := func(q float64) int64 { return gaps[int(q*float64(len(gaps)-1))] }
	return [3]int64{pick(0.5), pick(0.9), pick(0.99)}
}

const windowFile = `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}
{"timestamp": 1000, "input_length": 20, "output_length": 5, "hash_ids": [1]}
{"timestamp": 2000, "input_length": 30, "output_length": 5, "hash_ids": [2]}
{"timestamp": 2000, "input_length": 40, "output_length": 5, "hash_ids": [3, 4]}
{"timestamp": 3500, "input_length": 50, "output_length": 5, "hash_ids": [5, 6]}
{"timestamp": 5000, "input_length": 60, "output_length": 5, "hash_ids": [7, 8]}
`

func TestWindowSpeedLimitClamp(t *testing.T) {
	p := writeFile(t, "w.jsonl", windowFile)
	base := ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, BlockSize: 32}
	cases := []struct {
		name   string
		mod    func(*ImportOptions)
		want   []int64 // arrivals, ns
		inputs []int32
	}{
		{"all", func(*ImportOptions) {}, []int64{0, 1e9, 2e9, 2e9, 3.5e9, 5e9}, []int32{10, 20, 30, 40, 50, 60}},
		{"window", func(o *ImportOptions) { o.Start, o.Duration = time.Second, 2500*time.Millisecond+1 }, []int64{0, 1e9, 1e9, 2.5e9}, []int32{20, 30, 40, 50}},
		{"speed", func(o *ImportOptions) { o.Start, o.Speed = 2*time.Second, 2 }, []int64{0, 0, 0.75e9, 1.5e9}, []int32{30, 40, 50, 60}},
		{"limit", func(o *ImportOptions) { o.Limit = 3 }, []int64{0, 1e9, 2e9}, []int32{10, 20, 30}},
		{"clamp", func(o *ImportOptions) { o.MaxInputTokens = 35 }, []int64{0, 1e9, 2e9, 2e9, 3.5e9, 5e9}, []int32{10, 20, 30, 35, 35, 35}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mod(&o)
			m := &Mooncake{Opts: o}
			convs, err := m.Conversations(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rows, meta := writeAndReadBack(t, m, convs, m.Report())
			var at []int64
			var in []int32
			for _, r := range rows {
				at = append(at, r.ArrivalOffsetNs)
				in = append(in, r.InputTokens)
				if r.StartOffsetNs != r.ArrivalOffsetNs {
					t.Errorf("row %s: start %d != arrival %d", r.ConversationID, r.StartOffsetNs, r.ArrivalOffsetNs)
				}
				if n := importCorpus(t).Tokenizer().Count(r.Messages[0].Content); n != int(r.InputTokens) {
					t.Errorf("row %s: content has %d tokens, InputTokens %d", r.ConversationID, n, r.InputTokens)
				}
			}
			if !slices.Equal(at, tc.want) || !slices.Equal(in, tc.inputs) {
				t.Fatalf("arrivals %v inputs %v, want %v %v", at, in, tc.want, tc.inputs)
			}
			if meta.Options["requests"] != strconv.Itoa(len(tc.want)) || meta.Options["window_start"] != o.Start.String() {
				t.Fatalf("metadata options %v", meta.Options)
			}
		})
	}
}

func TestWindowBadOptions(t *testing.T) {
	p := writeFile(t, "w.jsonl", windowFile)
	for _, o := range []ImportOptions{
		{},
		{Path: p, Speed: -1},
		{Path: p, Start: -time.Second},
		{Path: p, MaxInputTokens: -1},
	} {
		if _, err := (&Mooncake{Opts: o}).Conversations(context.Background()); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if _, err := (&Mooncake{Opts: ImportOptions{Path: filepath.Join(t.TempDir(), "missing.jsonl")}}).Conversations(context.Background()); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseDecimalNs(t *testing.T) {
	for _, c := range []struct {
		in   string
		unit int64
		want int64
	}{
		{"0", 1e6, 0}, {"27482", 1e6, 27482e6}, {"1.5", 1e6, 1500000},
		{"61.114", 1e9, 61114000000}, {"0.123456789", 1e9, 123456789},
		{"0.1234567899", 1e9, 123456789}, {"5", 1e9, 5e9}, {"5.", 1e9, 5e9}, {".5", 1e9, 5e8},
	} {
		got, err := parseDecimalNs(c.in, c.unit)
		if err != nil || got != c.want {
			t.Errorf("parseDecimalNs(%q, %d) = %d, %v; want %d", c.in, c.unit, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "x", "1e3", "1.2.3", "+5", "1.a"} {
		if _, err := parseDecimalNs(bad, 1e9); err == nil {
			t.Errorf("parseDecimalNs(%q) accepted", bad)
		}
	}
}

func TestRowErrorNamesFileLineField(t *testing.T) {
	err := error(&RowError{File: "a.csv", Line: 7, Field: "ContextTokens", Err: errors.New("boom")})
	if err.Error() != `a.csv line 7: field "ContextTokens": boom` {
		t.Fatal(err)
	}
}

// An import whose prompts would exceed MaxBytes is refused after reading
// the rows and before making their text; a shared field error names MaxBytes.
func TestImportMaxBytes(t *testing.T) {
	p := writeFile(t, "w.jsonl", windowFile)
	o := ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, BlockSize: 32}
	m, err := NewMooncake(o)
	if err != nil {
		t.Fatal(err)
	}
	convs, err := m.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var text int
	for _, c := range convs {
		text += len(c[0].Messages[0].Content)
	}
	for _, c := range []struct {
		limit int64
		ok    bool
	}{{int64(text) / 2, false}, {int64(text) * 2, true}} {
		o.MaxBytes = c.limit
		_, err := (&Mooncake{Opts: o}).Conversations(context.Background())
		var fe *fielderr.Error
		if c.ok != (err == nil) || (!c.ok && (!errors.As(err, &fe) || fe.Field != "MaxBytes" || !errors.Is(err, ErrTooLarge))) {
			t.Errorf("limit %d for %d bytes of prompts: %v", c.limit, text, err)
		}
	}
	sg := writeFile(t, "s.jsonl", `{"id":"a","conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}`+"\n")
	_, err = (&ShareGPT{Opts: ShareGPTOptions{Path: sg, Tokenizer: importCorpus(t).Tokenizer(), MaxBytes: 10}}).Conversations(context.Background())
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("ShareGPT file above MaxBytes: %v", err)
	}
}
