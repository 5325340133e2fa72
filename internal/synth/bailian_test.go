package synth

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bailianQuirks: chat 1 -> 3 -> 6 is one conversation; chat 2 and 4 are
// first turns sharing a 16-token system block (hash 100); chat 5 names a
// parent that is not in the file; chat 7 is a second child of 1 (a branch);
// float-second timestamps.
const bailianQuirks = `{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 10, "type": "text", "turn": 1, "hash_ids": [100, 101, 102]}
{"chat_id": 2, "parent_chat_id": -1, "timestamp": 1.25, "input_length": 20, "output_length": 5, "type": "text", "turn": 1, "hash_ids": [100, 103]}
{"chat_id": 3, "parent_chat_id": 1, "timestamp": 4.5, "input_length": 70, "output_length": 8, "type": "text", "turn": 2, "hash_ids": [100, 101, 104, 105, 106]}
{"chat_id": 4, "parent_chat_id": -1, "timestamp": 5, "input_length": 16, "output_length": 3, "type": "image", "turn": 1, "hash_ids": [100]}
{"chat_id": 5, "parent_chat_id": 999, "timestamp": 6.001, "input_length": 33, "output_length": 3, "type": "text", "turn": 4, "hash_ids": [107, 108, 109]}
{"chat_id": 6, "parent_chat_id": 3, "timestamp": 9.5, "input_length": 100, "output_length": 2, "type": "text", "turn": 3, "hash_ids": [100, 101, 104, 105, 110, 111, 112]}
{"chat_id": 7, "parent_chat_id": 1, "timestamp": 10, "input_length": 60, "output_length": 2, "type": "text", "turn": 2, "hash_ids": [100, 101, 113, 114]}
`

func TestBailianChains(t *testing.T) {
	p := writeFile(t, "qwen_traceA_blksz_16.jsonl", bailianQuirks)
	b := &Bailian{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}}
	convs, err := b.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows, meta := writeAndReadBack(t, b, convs, b.Report())
	if meta.Options["block_size"] != "16" || len(rows) != 7 {
		t.Fatalf("%d rows, options %v", len(rows), meta.Options)
	}
	type want struct {
		id          string
		turn        int32
		at, think   int64
		in          int32
		startOffset int64
	}
	wants := []want{
		{"bailian-c1", 0, 0.5e9, 0, 40, 0.5e9},
		{"bailian-c1", 1, 4.5e9, 4e9, 20, 0.5e9}, // 70 - 40 - 10
		{"bailian-c1", 2, 9.5e9, 5e9, 22, 0.5e9}, // 100 - 70 - 8
		{"bailian-c2", 0, 1.25e9, 0, 20, 1.25e9},
		{"bailian-c4", 0, 5e9, 0, 16, 5e9},
		{"bailian-c5", 0, 6.001e9, 0, 33, 6.001e9}, // parent absent: whole prompt
		{"bailian-c7", 0, 10e9, 0, 60, 10e9},       // branch: whole prompt
	}
	tok := importCorpus(t).Tokenizer()
	for i, r := range rows {
		w := wants[i]
		if r.ConversationID != w.id || r.Turn != w.turn || r.ArrivalOffsetNs != w.at || r.ThinkTimeNs != w.think || r.InputTokens != w.in || r.StartOffsetNs != w.startOffset {
			t.Errorf("row %d: %s turn %d at %d think %d in %d start %d; want %+v", i, r.ConversationID, r.Turn, r.ArrivalOffsetNs, r.ThinkTimeNs, r.InputTokens, r.StartOffsetNs, w)
		}
		if n := tok.Count(r.Messages[0].Content); n != int(r.InputTokens) {
			t.Errorf("row %d: %d tokens of content, InputTokens %d", i, n, r.InputTokens)
		}
	}
	// First turns sharing hash 100 share their first 16 tokens, and chat 4
	// (hash 100 alone) is exactly that block.
	c1, c2, c4 := tok.Encode(rows[0].Messages[0].Content), tok.Encode(rows[3].Messages[0].Content), tok.Encode(rows[4].Messages[0].Content)
	if !slices.Equal(c1[:16], c2[:16]) || !slices.Equal(c4, c1[:16]) || slices.Equal(c1[16:20], c2[16:20]) {
		t.Error("first turns sharing hash 100 do not share exactly 16 tokens")
	}
	if !slices.Equal(rows[2].PrefixHashes, []int64{100, 101, 104, 105, 110, 111, 112}) {
		t.Errorf("prefix hashes %v", rows[2].PrefixHashes)
	}
}

func TestBailianWindowSplitsChains(t *testing.T) {
	p := writeFile(t, "b.jsonl", bailianQuirks)
	b := &Bailian{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, Start: 4 * time.Second, Duration: 6 * time.Second}}
	convs, err := b.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Chat 3's parent (1) is before the window: 3 starts a conversation with
	// its whole prompt and 6 continues it; 7 (at 10 s) is past the window.
	var got []string
	for _, c := range convs {
		got = append(got, c[0].ConversationID+"/"+strconv.Itoa(len(c))+"/"+strconv.Itoa(int(c[0].InputTokens)))
	}
	want := []string{"bailian-c3/2/70", "bailian-c4/1/16", "bailian-c5/1/33"}
	if !slices.Equal(got, want) {
		t.Fatalf("conversations %v, want %v", got, want)
	}
	if convs[0][0].ArrivalOffsetNs != 0.5e9 || convs[0][1].ArrivalOffsetNs != 5.5e9 {
		t.Fatalf("arrivals %d %d", convs[0][0].ArrivalOffsetNs, convs[0][1].ArrivalOffsetNs)
	}
}

func TestBailianBadInput(t *testing.T) {
	good := `{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 10, "hash_ids": [1]}` + "\n"
	for _, c := range []struct{ line, want string }{
		{`{"chat_id": 2, "timestamp": 1, "input_length": 4, "output_length": 1}`, `line 2: field "parent_chat_id"`},
		{`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 1, "input_length": 4, "output_length": 1}`, `line 2: field "chat_id": 1 repeats the chat_id of line 1`},
		{`{"chat_id": 2, "parent_chat_id": -1, "timestamp": "soon", "input_length": 4, "output_length": 1}`, `line 2: field "timestamp"`},
		{`{"chat_id": 2, "parent_chat_id": -1, "timestamp": 1, "input_length": 4.5, "output_length": 1}`, `line 2, column 73: field "input_length": want int, found JSON number 4.5`},
		{`{"chat_id": 2, "parent_chat_id": 2, "timestamp": 1, "input_length": 4, "output_length": 1}`, `line 2: field "parent_chat_id"`},
		{`not json`, `line 2, column 2: malformed JSON`},
	} {
		p := writeFile(t, "bad.jsonl", good+c.line+"\n")
		_, err := (&Bailian{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}}).Conversations(context.Background())
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), p+" "+c.want) {
			t.Errorf("line %s: error %v, want %q", c.line, err, c.want)
		}
		b := &Bailian{Opts: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, SkipBad: true}}
		if convs, err := b.Conversations(context.Background()); err != nil || len(convs) != 1 || b.Stats().BadRows != 1 {
			t.Errorf("skip-bad %s: %d convs, %+v, %v", c.line, len(convs), b.Stats(), err)
		}
	}
}
