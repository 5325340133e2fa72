package synth

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// mooncakeQuirks: shared timestamps, shared hash prefixes, a partial last
// block, a blank line, a CRLF line and a float millisecond timestamp.
const mooncakeQuirks = `{"timestamp": 0, "input_length": 80, "output_length": 7, "hash_ids": [0, 1, 2]}
{"timestamp": 0, "input_length": 70, "output_length": 0, "hash_ids": [0, 1, 3]}

{"timestamp": 3000, "input_length": 32, "output_length": 9, "hash_ids": [0]}` + "\r\n" +
	`{"timestamp": 4500.25, "input_length": 100, "output_length": 1, "hash_ids": [4, 5, 6, 7]}
`

func TestMooncakeQuirks(t *testing.T) {
	p := writeFile(t, "m.jsonl", mooncakeQuirks)
	m := &Mooncake{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, BlockSize: 32}}
	convs, err := m.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows, meta := writeAndReadBack(t, m, convs, m.Report())
	if len(rows) != 4 || meta.Source != "mooncake" || meta.Options["block_size"] != "32" {
		t.Fatalf("%d rows, meta %+v", len(rows), meta)
	}
	wantAt := []int64{0, 0, 3e9, 4500250000}
	wantIDs := []string{"mooncake-l000000001", "mooncake-l000000002", "mooncake-l000000004", "mooncake-l000000005"}
	tok := importCorpus(t).Tokenizer()
	enc := make([][]uint, len(rows))
	for i, r := range rows {
		if r.ArrivalOffsetNs != wantAt[i] || r.StartOffsetNs != wantAt[i] || r.ConversationID != wantIDs[i] || r.Turn != 0 {
			t.Errorf("row %d: %s at %d", i, r.ConversationID, r.ArrivalOffsetNs)
		}
		enc[i] = tok.Encode(r.Messages[0].Content)
		if len(enc[i]) != int(r.InputTokens) || r.Messages[0].Tokens != r.InputTokens || r.Messages[0].Role != "user" {
			t.Errorf("row %d: %d tokens encoded, %d recorded", i, len(enc[i]), r.InputTokens)
		}
	}
	if rows[1].OutputTokens != 1 {
		t.Errorf("output_length 0 became %d, want 1 (max_tokens 0 is refused by servers)", rows[1].OutputTokens)
	}
	if !slices.Equal(rows[0].PrefixHashes, []int64{0, 1, 2}) || !slices.Equal(rows[2].PrefixHashes, []int64{0}) {
		t.Errorf("prefix hashes %v %v", rows[0].PrefixHashes, rows[2].PrefixHashes)
	}
	// [0 1 2] and [0 1 3] share 64 tokens; [0] with 32 tokens is their prefix.
	if !slices.Equal(enc[0][:64], enc[1][:64]) || slices.Equal(enc[0][64:68], enc[1][64:68]) {
		t.Error("rows 1 and 2 do not share exactly their 2-block prefix")
	}
	if !slices.Equal(enc[2], enc[0][:32]) {
		t.Error("row 3 (hash [0]) is not the first block of row 1")
	}
	if slices.Equal(enc[3][:4], enc[0][:4]) {
		t.Error("row 4 (hash 4) starts like hash 0")
	}
}

func TestMooncakeBadInput(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}` + "\n"
	cases := []struct{ line, want string }{
		{`{"timestamp": 1, "input_length": "ten", "output_length": 5}`, `line 2, column 39: field "input_length": want int, found JSON string`},
		{`{"timestamp": 1, "output_length": 5}`, `line 2: field "input_length": missing`},
		{`{"timestamp": 1, "input_length": 3, "output_length": 5, "hash_ids": [1, -2]}`, `line 2: field "hash_ids"`},
		{`{"timestamp": "1e3", "input_length": 3, "output_length": 5}`, `line 2: field "timestamp"`},
		{`{"timestamp": 1, "input_length": 3,`, `line 2: malformed JSON: unexpected end of file`},
		{`{"timestamp": -5, "input_length": 3, "output_length": 5}`, `line 2: field "timestamp"`},
	}
	for _, c := range cases {
		p := writeFile(t, "bad.jsonl", good+c.line+"\n"+good)
		_, err := (&Mooncake{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}}).Conversations(context.Background())
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), p+" "+c.want) {
			t.Errorf("line %s: error %v, want it to contain %q", c.line, err, p+" "+c.want)
			continue
		}
		m := &Mooncake{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, SkipBad: true}}
		convs, err := m.Conversations(context.Background())
		if err != nil || len(convs) != 2 || m.Stats().BadRows != 1 || m.Report()["bad_rows"] != "1" || !strings.Contains(m.Report()["bad_row_1"], "line 2") {
			t.Errorf("skip-bad: %d convs, stats %+v, err %v", len(convs), m.Stats(), err)
		}
	}
}

// mooncakeRow is a line of the real file, read independently of the importer.
type mooncakeRow struct {
	Timestamp   int64   `json:"timestamp"`
	InputLength int     `json:"input_length"`
	HashIDs     []int64 `json:"hash_ids"`
}

const sharedMooncake = "../../../shared/data/mooncake/conversation_trace.jsonl"

func readMooncakeRows(t *testing.T) []mooncakeRow {
	t.Helper()
	f, err := os.Open(sharedMooncake)
	if err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	defer f.Close()
	var rows []mooncakeRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r mooncakeRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestMooncakeSharedData imports the published conversation trace whole
// (prompts clamped to keep it small) and compares count, span and
// inter-arrival percentiles with the file's own.
func TestMooncakeSharedData(t *testing.T) {
	src := readMooncakeRows(t)
	m := &Mooncake{Opts: ImportOptions{Path: sharedMooncake, Corpus: importCorpus(t), PromptText: true, MaxInputTokens: 8}}
	convs, err := m.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, len(src))
	for i, r := range src {
		want[i] = r.Timestamp * int64(time.Millisecond)
	}
	slices.Sort(want)
	got := arrivals(convs)
	if len(got) != len(src) || len(src) != 12031 {
		t.Fatalf("%d requests, file has %d", len(got), len(src))
	}
	if got[len(got)-1]-got[0] != want[len(want)-1]-want[0] {
		t.Fatalf("span %v, file %v", time.Duration(got[len(got)-1]-got[0]), time.Duration(want[len(want)-1]-want[0]))
	}
	if gp, wp := gapPercentiles(got), gapPercentiles(want); gp != wp {
		t.Fatalf("inter-arrival p50/p90/p99 %v, file %v", gp, wp)
	}
	if st := m.Stats(); st.Clamped == 0 || st.Requests != 12031 || st.Conversations != 12031 {
		t.Fatalf("stats %+v", st)
	}

	// A 60 s window, with speed 2: the same requests, half the gaps.
	w := &Mooncake{Opts: ImportOptions{Path: sharedMooncake, Corpus: importCorpus(t), PromptText: true, MaxInputTokens: 8, Start: 600 * time.Second, Duration: 60 * time.Second, Speed: 2}}
	wc, err := w.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var inWin []int64
	for _, r := range src {
		if ts := r.Timestamp * int64(time.Millisecond); ts >= 600e9 && ts < 660e9 {
			inWin = append(inWin, (ts-600e9)/2)
		}
	}
	slices.Sort(inWin)
	if g := arrivals(wc); !slices.Equal(g, inWin) {
		t.Fatalf("window: %d arrivals, want %d", len(g), len(inWin))
	}
}

// TestMooncakeSharedPrefixes checks on real rows that every pair of
// requests sharing k leading hash ids shares exactly k*512 leading tokens.
func TestMooncakeSharedPrefixes(t *testing.T) {
	if _, err := os.Stat(sharedMooncake); err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	m := &Mooncake{Opts: ImportOptions{Path: sharedMooncake, Corpus: importCorpus(t), PromptText: true, Duration: 4 * time.Second, MaxInputTokens: 4096}}
	convs, err := m.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) < 10 {
		t.Fatalf("only %d requests in the first 4 s", len(convs))
	}
	tok := importCorpus(t).Tokenizer()
	enc := make([][]uint, len(convs))
	for i, c := range convs {
		enc[i] = tok.Encode(c[0].Messages[0].Content)
		if len(enc[i]) != int(c[0].InputTokens) {
			t.Fatalf("%s: %d tokens, InputTokens %d", c[0].ConversationID, len(enc[i]), c[0].InputTokens)
		}
	}
	pairs := 0
	for i := range convs {
		for j := i + 1; j < len(convs); j++ {
			a, b := convs[i][0].PrefixHashes, convs[j][0].PrefixHashes
			k := 0
			for k < len(a) && k < len(b) && a[k] == b[k] {
				k++
			}
			n := min(k*512, len(enc[i]), len(enc[j]))
			if !slices.Equal(enc[i][:n], enc[j][:n]) {
				t.Fatalf("%s and %s share %d hashes but not their first %d tokens", convs[i][0].ConversationID, convs[j][0].ConversationID, k, n)
			}
			if n < len(enc[i]) && n < len(enc[j]) && enc[i][n] == enc[j][n] && enc[i][n+1] == enc[j][n+1] {
				t.Fatalf("%s and %s share %d hashes and more than %d tokens", convs[i][0].ConversationID, convs[j][0].ConversationID, k, n)
			}
			if k > 0 {
				pairs++
			}
		}
	}
	if pairs == 0 {
		t.Fatal("no request pair shares a hash prefix in the window")
	}
	t.Logf("%d requests, %d pairs sharing a hash prefix", len(convs), pairs)
}
