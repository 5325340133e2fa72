package synth

import (
	"github.com/tracekit/tracekit/trace"

	"context"
	"errors"
	"fmt"
)

// BailianBlockSize is the tokens per hash_ids block of the Qwen-Bailian
// traces.
const BailianBlockSize = 16

// Bailian imports a Qwen-Bailian usage trace: JSONL lines
//
//	{"chat_id": 159, "parent_chat_id": 55, "timestamp": 61.114, "input_length": 521,
//	 "output_length": 132, "type": "text", "turn": 2, "hash_ids": [1089, 1090, 1091]}
//
// timestamp in seconds from the trace start, hash_ids of BlockSize-token
// prompt blocks. parent_chat_id links a turn to the previous turn of its
// conversation (-1 for a first turn); following the links gives real
// multi-turn conversations.
//
// Timing stored: every turn's ArrivalOffsetNs is its own timestamp (so
// open-loop replay, --timing trace, reproduces production exactly), and
// ThinkTimeNs of turn k>0 is the gap between its arrival and the previous
// turn's arrival. The trace does not say how long the previous response
// took, so that gap still contains it: closed-loop replay, which waits for
// the response and then ThinkTimeNs, sends turn k later than production by
// about one response time.
//
// A turn whose parent is not in the window (or not in the file) starts a
// conversation with its whole recorded prompt. If two turns name the same
// parent, the earlier continues the conversation and the later starts its
// own. The "turn" and "type" fields are read but not needed.
type Bailian struct {
	Opts  ImportOptions
	stats ImportStats
}

var _ Streamer = (*Bailian)(nil)

// Name is "bailian".
func (*Bailian) Name() string { return "bailian" }

// NewBailian checks o and returns the source.
func NewBailian(o ImportOptions) (*Bailian, error) {
	if _, err := o.validate(BailianBlockSize); err != nil {
		return nil, err
	}
	return &Bailian{Opts: o}, nil
}

type bailianLine struct {
	jsonlLengths
	ChatID       *int64 `json:"chat_id"`
	ParentChatID *int64 `json:"parent_chat_id"`
	Type         string `json:"type"`
	Turn         int    `json:"turn"`
}

// bailianRow is a row with its chat links.
type bailianRow struct {
	importRow
	chat, parent int64
}

// Conversations reads the file and chains turns into conversations.
func (b *Bailian) Conversations(ctx context.Context) ([]Conversation, error) { return collect(ctx, b) }

// Stream reads the file, chains turns and emits conversations (Streamer).
func (b *Bailian) Stream(ctx context.Context, emit func(Conversation) error) error {
	o, err := b.Opts.validate(BailianBlockSize)
	if err != nil {
		return fmt.Errorf("bailian: %w", err)
	}
	b.Opts, b.stats = o, ImportStats{}
	s, err := newRowStream(o, "bailian", &b.stats, &chatChains{tail: map[int64]*openConv{}, closed: map[int64]bool{}}, false, emit)
	if err != nil {
		return err
	}
	seen := map[int64]int{} // chat_id -> line
	err = readJSONL(ctx, o, &b.stats, func(line int, text []byte) (importRow, *RowError) {
		r, rerr := parseBailianLine(o.Path, line, text)
		if rerr != nil {
			return r.importRow, rerr
		}
		if prev, dup := seen[r.chat]; dup {
			return r.importRow, &RowError{File: o.Path, Line: line, Field: "chat_id", Err: fmt.Errorf("%d repeats the chat_id of line %d", r.chat, prev)}
		}
		seen[r.chat] = line
		r.importRow.chat, r.importRow.parent = r.chat, r.parent
		return r.importRow, nil
	}, s.add)
	if err == nil {
		err = s.finish()
	}
	if err != nil {
		return fmt.Errorf("bailian: %w", err)
	}
	return nil
}

func parseBailianLine(path string, line int, text []byte) (bailianRow, *RowError) {
	var l bailianLine
	if err := decodeJSONLine(path, line, text, &l); err != nil {
		return bailianRow{}, err
	}
	e := func(field string, err error) (bailianRow, *RowError) {
		return bailianRow{}, &RowError{File: path, Line: line, Field: field, Err: err}
	}
	switch {
	case l.ChatID == nil:
		return e("chat_id", errors.New("missing"))
	case l.ParentChatID == nil:
		return e("parent_chat_id", errors.New("missing (-1 for a first turn)"))
	}
	r, rerr := l.row(path, line, 1e9, "seconds")
	if rerr != nil {
		return bailianRow{}, rerr
	}
	if *l.ParentChatID == *l.ChatID {
		return e("parent_chat_id", fmt.Errorf("%d is the row's own chat_id", *l.ChatID))
	}
	return bailianRow{importRow: r, chat: *l.ChatID, parent: *l.ParentChatID}, nil
}

// chatChains follows parent links, in time order: a row continues the
// conversation whose last turn is its parent, else it starts one keyed by
// its own chat_id.
type chatChains struct {
	tail   map[int64]*openConv // chat_id of an open conversation's last turn
	closed map[int64]bool      // chat_id of a closed conversation's last turn
}

func (g *chatChains) place(s *rowStream, r importRow) (*openConv, string, bool, error) {
	if r.parent >= 0 {
		if c, ok := g.tail[r.parent]; ok {
			delete(g.tail, r.parent)
			return c, "", false, nil
		}
		if g.closed[r.parent] {
			return nil, "", false, s.closedError(r, "parent_chat_id", fmt.Sprintf("parent_chat_id %d", r.parent), nil)
		}
	}
	return nil, fmt.Sprintf("c%d", r.chat), false, nil
}

func (g *chatChains) joined(_ *rowStream, c *openConv, r importRow) {
	g.tail[r.chat] = c
	c.tail = r.chat
}

func (g *chatChains) done(_ *rowStream, c *openConv) {
	if g.tail[c.tail] == c {
		delete(g.tail, c.tail)
		g.closed[c.tail] = true
	}
}

func (*chatChains) multi() bool { return true }

// Prompts is the generator of the virtual prompts the last Stream wrote
// (Prompter); nil when they hold their text.
func (b *Bailian) Prompts() *trace.PromptGenerator { return b.stats.Prompts }

// Stats reports what the last Conversations call did with the file.
func (b *Bailian) Stats() ImportStats { return b.stats }

// Report is the source's window, options and counts, for the trace metadata (Reporter).
func (b *Bailian) Report() map[string]string { return b.Opts.metaOptions(b.stats) }

var _ Reporter = (*Bailian)(nil)
