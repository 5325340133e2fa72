package synth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/blocktext"
	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/trace"
)

// A streamed import emits conversations while it reads: with a 1 s
// grouping window over 100 s of rows, the first conversation leaves after
// a few rows, not after the file.
func TestStreamEmitsBeforeTheEnd(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 10, "output_length": 5, "hash_ids": [%d]}`+"\n", i*1000, i)
	}
	m, err := NewMooncake(ImportOptions{Path: writeFile(t, "m.jsonl", b.String()), Corpus: importCorpus(t), BlockSize: 16, GroupWindow: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var rowsAtEmit []int
	var ids []string
	err = m.Stream(context.Background(), func(c Conversation) error {
		rowsAtEmit = append(rowsAtEmit, m.stats.Rows)
		ids = append(ids, c[0].ConversationID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 100 || rowsAtEmit[0] > 3 || rowsAtEmit[50] > 53 {
		t.Fatalf("%d conversations; rows read when the 1st and 51st left: %v", len(ids), rowsAtEmit)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("conversation %d (%s) after %s: not in trace order", i, ids[i], ids[i-1])
		}
	}
}

// Rows out of time order within the window are placed in time order; a row
// out of order by more than the window is refused with its line and the
// window's field, never reordered or dropped.
func TestStreamOutOfOrder(t *testing.T) {
	file := `{"timestamp": 0, "input_length": 10, "output_length": 5}
{"timestamp": 3000, "input_length": 11, "output_length": 5}
{"timestamp": 2500, "input_length": 12, "output_length": 5}
{"timestamp": 9000, "input_length": 13, "output_length": 5}
{"timestamp": 1000, "input_length": 14, "output_length": 5}
`
	p := writeFile(t, "m.jsonl", file)
	m, _ := NewMooncake(ImportOptions{Path: p, Corpus: importCorpus(t), BlockSize: 16, GroupWindow: 10 * time.Second})
	convs, err := m.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	for _, c := range convs {
		got = append(got, c[0].InputTokens)
	}
	if fmt.Sprint(got) != "[10 14 12 11 13]" {
		t.Fatalf("prompt lengths in trace order %v, want [10 14 12 11 13]", got)
	}
	m, _ = NewMooncake(ImportOptions{Path: p, Corpus: importCorpus(t), BlockSize: 16, GroupWindow: time.Second})
	_, err = m.Conversations(context.Background())
	var fe *fielderr.Error
	var re *RowError
	if !errors.As(err, &fe) || fe.Field != "GroupWindow" || !errors.As(err, &re) || re.Line != 5 || !strings.Contains(err.Error(), "widen") {
		t.Fatalf("row 5 out of order by 8 s with a 1 s window: %v", err)
	}
}

// A session (BurstGPT) or chain (Bailian) idle for longer than the window is
// complete; a later row that would continue it is refused, naming its line.
func TestStreamClosedConversationRefused(t *testing.T) {
	csv := "Session ID,Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
		"7,10,ChatGPT,100,50,150,Conversation log\n" +
		"8,20,ChatGPT,100,50,150,Conversation log\n" +
		"7,30,ChatGPT,300,50,350,Conversation log\n"
	p := writeFile(t, "b.csv", csv)
	for _, c := range []struct {
		window time.Duration
		convs  int
	}{{time.Minute, 2}, {15 * time.Second, 0}} {
		b, _ := NewBurstGPT(BurstGPTOptions{ImportOptions: ImportOptions{Path: p, Corpus: importCorpus(t), GroupWindow: c.window}})
		convs, err := b.Conversations(context.Background())
		var re *RowError
		if c.convs > 0 && (err != nil || len(convs) != c.convs || len(convs[0]) != 2) {
			t.Fatalf("window %v: %d conversations (%v)", c.window, len(convs), err)
		}
		if c.convs == 0 && (!errors.As(err, &re) || re.Line != 4 || re.Field != "Session ID") {
			t.Fatalf("window %v: the session with id 7 resumes after 20 s: %v", c.window, err)
		}
	}
	jl := `{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 40, "output_length": 10}
{"chat_id": 2, "parent_chat_id": 1, "timestamp": 100, "input_length": 80, "output_length": 10}
`
	b, _ := NewBailian(ImportOptions{Path: writeFile(t, "c.jsonl", jl), Corpus: importCorpus(t), GroupWindow: time.Minute})
	_, err := b.Conversations(context.Background())
	var re *RowError
	if !errors.As(err, &re) || re.Line != 2 || re.Field != "parent_chat_id" {
		t.Fatalf("chat 2 continues chat 1 after 100 s with a 1 min window: %v", err)
	}
}

// A virtual import (the default over the default corpus) holds the same
// turns as a --prompt-text import except the text, and the text its
// messages name (blocks PrefixHashes[BlockStart:], Tokens tokens, filler
// salted by BlockSeed) is byte for byte the text the other stored.
func TestVirtualPromptsMatchText(t *testing.T) {
	mc := `{"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 10, "input_length": 70, "output_length": 5, "hash_ids": [1, 2, 4, 5, 6]}
{"timestamp": 20, "input_length": 7, "output_length": 5}
`
	bl := `{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 10, "hash_ids": [100, 101, 102]}
{"chat_id": 3, "parent_chat_id": 1, "timestamp": 4.5, "input_length": 70, "output_length": 8, "hash_ids": [100, 101, 104, 105, 106]}
`
	bg := "Session ID,Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n7,10,ChatGPT,100,50,150,Conversation log\n7,20,ChatGPT,300,50,350,Conversation log\n,21,ChatGPT,60,6,66,API log\n"
	az := "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.0000000,80,4\n"
	cases := []struct {
		name string
		make func(o ImportOptions) Streamer
		file string
	}{
		{"mooncake", func(o ImportOptions) Streamer { o.BlockSize = 16; return &Mooncake{Opts: o} }, writeFile(t, "m.jsonl", mc)},
		{"bailian", func(o ImportOptions) Streamer { return &Bailian{Opts: o} }, writeFile(t, "b.jsonl", bl)},
		{"burstgpt", func(o ImportOptions) Streamer { return &BurstGPT{Opts: BurstGPTOptions{ImportOptions: o}} }, writeFile(t, "g.csv", bg)},
		{"azure", func(o ImportOptions) Streamer { return &Azure{Opts: o} }, writeFile(t, "a.csv", az)},
	}
	for _, c := range cases {
		virt := c.make(ImportOptions{Path: c.file, Corpus: importCorpus(t)})
		text := c.make(ImportOptions{Path: c.file, Corpus: importCorpus(t), PromptText: true})
		vc, err := collect(context.Background(), virt)
		if err != nil {
			t.Fatal(err)
		}
		tc, err := collect(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		gen := virt.(Prompter).Prompts()
		if gen == nil || gen.Name != trace.PromptGeneratorBlocks || text.(Prompter).Prompts() != nil {
			t.Fatalf("%s: generators %+v (virtual) and %+v (text)", c.name, gen, text.(Prompter).Prompts())
		}
		blocks, err := blocktext.DefaultBlocks(gen.Tokenizer, gen.BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		if len(vc) != len(tc) {
			t.Fatalf("%s: %d and %d conversations", c.name, len(vc), len(tc))
		}
		for i := range vc {
			for k := range vc[i] {
				v, w := vc[i][k], tc[i][k]
				m := v.Messages[0]
				if !m.Virtual || m.Content != "" {
					t.Fatalf("%s %s/%d: message %+v is not virtual", c.name, v.ConversationID, k, m)
				}
				got := blocks.Text(v.PrefixHashes[m.BlockStart:], int(m.Tokens), m.BlockSeed)
				if got != w.Messages[0].Content {
					t.Fatalf("%s %s/%d: virtual text differs from the stored text", c.name, v.ConversationID, k)
				}
				v.Messages = []trace.Message{{Role: m.Role, Content: got, Tokens: m.Tokens}}
				if fmt.Sprint(v) != fmt.Sprint(w) {
					t.Fatalf("%s: turns differ beyond the text:\n%+v\n%+v", c.name, v, w)
				}
			}
		}
	}
}
