package synth

import (
	"context"
	"errors"
	"fmt"
	"sort"
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

var _ Source = (*Bailian)(nil)

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
func (b *Bailian) Conversations(ctx context.Context) ([]Conversation, error) {
	o, err := b.Opts.validate(BailianBlockSize)
	if err != nil {
		return nil, fmt.Errorf("bailian: %w", err)
	}
	b.Opts, b.stats = o, ImportStats{}
	seen := map[int64]int{} // chat_id -> line
	read, err := readJSONL(ctx, o, &b.stats, func(line int, text []byte) (bailianRow, *RowError) {
		r, rerr := parseBailianLine(o.Path, line, text)
		if rerr != nil {
			return r, rerr
		}
		if prev, dup := seen[r.chat]; dup {
			return r, &RowError{File: o.Path, Line: line, Field: "chat_id", Err: fmt.Errorf("%d repeats the chat_id of line %d", r.chat, prev)}
		}
		seen[r.chat] = line
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("bailian: %w", err)
	}
	links := make(map[int]bailianRow, len(read)) // line -> links, read by the grouper
	rows := make([]importRow, len(read))
	for i, r := range read {
		links[r.line] = r
		rows[i] = r.importRow
	}
	return o.assemble("bailian", 0, rows, func(kept []importRow) []convGroup { return chainChats(kept, links) }, &b.stats)
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

// chainChats follows parent links among the kept rows, in time order: a
// row continues the conversation whose last turn is its parent, else it
// starts one keyed by its own chat_id.
func chainChats(kept []importRow, links map[int]bailianRow) []convGroup {
	order := append([]importRow(nil), kept...)
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].at != order[j].at {
			return order[i].at < order[j].at
		}
		return order[i].line < order[j].line
	})
	var gs []convGroup
	tail := map[int64]int{} // chat_id of a conversation's last turn -> group
	for _, r := range order {
		l := links[r.line]
		i, ok := tail[l.parent]
		if ok && l.parent >= 0 {
			delete(tail, l.parent)
		} else {
			i = len(gs)
			gs = append(gs, convGroup{key: fmt.Sprintf("c%d", l.chat)})
		}
		gs[i].rows = append(gs[i].rows, r)
		tail[l.chat] = i
	}
	return gs
}

// Stats reports what the last Conversations call did with the file.
func (b *Bailian) Stats() ImportStats { return b.stats }

// Report is the source's window, options and counts, for the trace metadata (Reporter).
func (b *Bailian) Report() map[string]string { return b.Opts.metaOptions(b.stats) }

var _ Reporter = (*Bailian)(nil)
