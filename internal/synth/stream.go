package synth

import (
	"container/heap"
	"container/list"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// DefaultGroupWindow is ImportOptions.GroupWindow when it is zero.
const DefaultGroupWindow = 10 * time.Minute

// Streamer is a Source that hands its conversations over one at a time, in
// the trace's row order (StartOffsetNs, then ConversationID), as they
// complete, so that a trace of any length is written with bounded memory.
// Generate uses Stream when the job has no Schedule.
type Streamer interface {
	Source
	// Stream calls emit with every conversation in row order; an error
	// from emit ends the stream with that error.
	Stream(ctx context.Context, emit func(Conversation) error) error
}

// Prompter is a Source that may write virtual prompts
// (trace.Message.Virtual): Prompts is their generator after the source ran,
// for TraceMeta.Prompts; nil when every message holds its text.
type Prompter interface {
	Prompts() *trace.PromptGenerator
}

// collect runs a stream to its end and returns its conversations (the
// Conversations method of a Streamer).
func collect(ctx context.Context, s Streamer) ([]Conversation, error) {
	var convs []Conversation
	err := s.Stream(ctx, func(c Conversation) error {
		convs = append(convs, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return convs, nil
}

// rowStream turns an importer's rows, in file order, into conversations in
// trace order with memory bounded by the grouping window W
// (ImportOptions.GroupWindow):
//
//  1. Reorder: rows wait in a heap ordered by (timestamp, line) and are
//     released once their timestamp is below the latest timestamp read
//     minus W. A row earlier than one already released is refused (it is
//     out of order by more than W); the rows released are therefore in
//     (timestamp, line) order, exactly the order the in-memory import
//     sorted them into.
//  2. Window and grouping, in that order: the window [Start,
//     Start+Duration) is applied on the source's timeline (Azure's origin,
//     its earliest row, is the first row released), and the grouping
//     places each row in a conversation, single-turn or a session/chain.
//     Conversations are created in the order of their first row, which is
//     the in-memory import's conversation order, so Limit keeps the same
//     conversations.
//  3. Close and emit: a multi-turn conversation is closed once no row has
//     joined it for W of released time; a row that would join a closed
//     one is refused. Conversations leave in creation order, each once it
//     is closed and every earlier one has left; those sharing a start
//     offset leave sorted by id, which is the trace's row order.
//
// A multi-turn conversation keeps only its turns inside the window; a turn
// whose earlier turns fall before the window starts a conversation of its
// own, carrying its whole recorded prompt. So the window holds exactly the
// source's requests in [Start, Start+Duration). Turn k>0 sends only the new
// tokens: its recorded prompt minus the previous turn's prompt and output
// (at least 1), since replay carries the history.
//
// Memory holds the rows of the last W of the file plus the conversations
// from the earliest still open onwards (a session open for hours holds the
// conversations that started after it until it closes).
type rowStream struct {
	o       ImportOptions
	src     string
	st      *ImportStats
	group   grouping
	emit    func(Conversation) error
	blocks  *Blocks
	virtual bool // messages are trace.Message.Virtual
	window  int64

	originFromData bool // Azure: origin is the earliest row
	originSet      bool
	origin, from   int64

	pending        pendingRows
	latest         int64 // the latest timestamp read
	lastAt         int64 // the last released row's timestamp and line
	lastLine       int
	released       bool
	spanLo, spanHi int64
	seenRow        bool
	queue          []*openConv // created, not emitted, in creation order
	open           *list.List  // open multi-turn conversations, least recently joined first
	created        int
	same           []Conversation // built conversations sharing one start offset
	sameOffset     int64
	tokens         float64 // prompt tokens built, for MaxBytes
	requests       int
	emitted        int
	first, last    int64 // arrival offsets of the requests built
}

// openConv is one conversation being assembled.
type openConv struct {
	key      string
	rows     []importRow
	lastJoin int64 // timestamp of the last row that joined it
	closed   bool
	over     bool  // past Limit: its rows are counted, not kept
	failed   bool  // a flagged failed turn: the id ends in "-failed"
	tail     int64 // Bailian: chat_id of its last turn
	elem     *list.Element
}

// grouping places released rows (in time order) into conversations.
type grouping interface {
	// place returns the conversation r joins, or nil to start one with
	// key (single: one that no other row joins); err refuses the row.
	place(s *rowStream, r importRow) (c *openConv, key string, single bool, err error)
	// joined is told that r joined or started c.
	joined(s *rowStream, c *openConv, r importRow)
	// done is told that c was closed.
	done(s *rowStream, c *openConv)
	// multi reports whether conversations can have more than one row.
	multi() bool
}

// singleRows is the grouping of single-turn sources: one conversation per
// row, keyed by its line so that requests sharing a timestamp keep file
// order.
type singleRows struct{}

func (singleRows) place(_ *rowStream, r importRow) (*openConv, string, bool, error) {
	return nil, fmt.Sprintf("l%09d", r.line), true, nil
}
func (singleRows) joined(*rowStream, *openConv, importRow) {}
func (singleRows) done(*rowStream, *openConv)              {}
func (singleRows) multi() bool                             { return false }

func newRowStream(o ImportOptions, src string, st *ImportStats, g grouping, originFromData bool, emit func(Conversation) error) (*rowStream, error) {
	corpus := o.Corpus
	if corpus == nil {
		var err error
		if corpus, err = DefaultCorpus(tokenizer.Default()); err != nil {
			return nil, fmt.Errorf("loading the default corpus for %s prompts: %w", src, err)
		}
	}
	blocks, err := NewBlocks(corpus, o.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("preparing %s prompt blocks: %w", src, err)
	}
	if g == nil {
		g = singleRows{}
	}
	virtual := !o.PromptText && corpus.IsDefault()
	if virtual {
		st.Prompts = &trace.PromptGenerator{Name: trace.PromptGeneratorBlocks, Tokenizer: corpus.Tokenizer().Name(), BlockSize: o.BlockSize}
	}
	s := &rowStream{
		o: o, src: src, st: st, group: g, emit: emit, blocks: blocks, virtual: virtual,
		window: int64(o.GroupWindow), originFromData: originFromData,
		open: list.New(), first: -1,
	}
	if !originFromData {
		s.originSet, s.from = true, int64(o.Start)
	}
	return s, nil
}

// add takes the next well-formed row of the file (counted in Rows by the
// caller).
func (s *rowStream) add(r importRow) error {
	if !s.seenRow {
		s.seenRow, s.spanLo, s.spanHi, s.latest = true, r.at, r.at, r.at
	}
	s.spanLo, s.spanHi = min(s.spanLo, r.at), max(s.spanHi, r.at)
	if s.released && r.at < s.lastAt {
		return fieldErr("ImportOptions", "GroupWindow", "%w", &RowError{File: s.o.Path, Line: r.line, Field: "timestamp",
			Err: fmt.Errorf("%v on the source's timeline is before line %d's %v, which was already placed: rows may be out of time order by at most the grouping window (%v); widen it",
				time.Duration(r.at), s.lastLine, time.Duration(s.lastAt), time.Duration(s.window))})
	}
	s.pending.push(r)
	s.latest = max(s.latest, r.at)
	for s.pending.len() > 0 && s.pending.first().at < s.latest-s.window {
		if err := s.release(s.pending.pop()); err != nil {
			return err
		}
	}
	return s.drain(false)
}

// finish releases every row left, closes every conversation and emits
// them; it sets the stats that need the whole file.
func (s *rowStream) finish() error {
	for s.pending.len() > 0 {
		if err := s.release(s.pending.pop()); err != nil {
			return err
		}
	}
	for e := s.open.Front(); e != nil; e = s.open.Front() {
		s.close(e.Value.(*openConv))
	}
	if err := s.drain(true); err != nil {
		return err
	}
	if s.seenRow {
		s.st.SourceSpanNs = s.spanHi - s.spanLo
	}
	s.st.Conversations = s.emitted
	if s.first >= 0 {
		s.st.TraceSpanNs = s.last - s.first
	}
	return nil
}

// release places one row, in time order.
func (s *rowStream) release(r importRow) error {
	s.released, s.lastAt, s.lastLine = true, r.at, r.line
	if !s.originSet {
		s.originSet, s.origin = true, r.at
		s.from = r.at + int64(s.o.Start)
	}
	if s.group.multi() {
		for e := s.open.Front(); e != nil; e = s.open.Front() {
			c := e.Value.(*openConv)
			if c.lastJoin >= r.at-s.window {
				break
			}
			s.close(c)
		}
	}
	if r.at < s.from || (s.o.Duration > 0 && r.at >= s.from+int64(s.o.Duration)) {
		s.st.OutsideWindow++
		return nil
	}
	c, key, single, err := s.group.place(s, r)
	if err != nil {
		return err
	}
	if c == nil {
		c = &openConv{key: key}
		s.created++
		c.over = s.o.Limit > 0 && s.created > s.o.Limit
		s.queue = append(s.queue, c)
		if single {
			c.closed = true
		} else {
			c.elem = s.open.PushBack(c)
		}
	} else if c.elem != nil {
		s.open.MoveToBack(c.elem)
	}
	c.lastJoin = r.at
	if c.over {
		s.st.OverLimit++
	} else {
		c.rows = append(c.rows, r)
	}
	s.group.joined(s, c, r)
	return nil
}

// close ends a multi-turn conversation: no row joins it any more.
func (s *rowStream) close(c *openConv) {
	c.closed = true
	s.open.Remove(c.elem)
	c.elem = nil
	s.group.done(s, c)
}

// drain emits the closed conversations at the head of the queue; at the
// end (all) the last group sharing a start offset goes too.
func (s *rowStream) drain(all bool) error {
	n := 0
	for n < len(s.queue) && s.queue[n].closed {
		c := s.queue[n]
		s.queue[n] = nil
		n++
		if c.over {
			continue
		}
		conv, err := s.build(c)
		if err != nil {
			return err
		}
		if len(s.same) > 0 && conv[0].StartOffsetNs != s.sameOffset {
			if err := s.flushSame(); err != nil {
				return err
			}
		}
		s.same = append(s.same, conv)
		s.sameOffset = conv[0].StartOffsetNs
	}
	if n > 0 {
		s.queue = append(s.queue[:0], s.queue[n:]...)
	}
	if all {
		return s.flushSame()
	}
	return nil
}

// flushSame emits the conversations sharing one start offset, by id.
func (s *rowStream) flushSame() error {
	slices.SortStableFunc(s.same, func(a, b Conversation) int {
		if a[0].ConversationID < b[0].ConversationID {
			return -1
		}
		if a[0].ConversationID > b[0].ConversationID {
			return 1
		}
		return 0
	})
	for i, c := range s.same {
		if err := s.emit(c); err != nil {
			return err
		}
		s.same[i] = nil
	}
	s.same = s.same[:0]
	return nil
}

// build makes the turns of a closed conversation and counts it.
func (s *rowStream) build(c *openConv) (Conversation, error) {
	for k := range c.rows {
		_, msg, _ := s.o.turnTokens(c.rows, k)
		s.tokens += float64(msg)
	}
	s.requests += len(c.rows)
	if err := s.checkSize(); err != nil {
		return nil, err
	}
	key := c.key
	if c.failed {
		key += "-failed"
	}
	conv := s.o.conversation(s.src+"-"+key, s.from, c.rows, s.blocks, s.virtual, s.st)
	s.st.Requests += len(conv)
	s.emitted++
	for _, t := range conv {
		if s.first < 0 || t.ArrivalOffsetNs < s.first {
			s.first = t.ArrivalOffsetNs
		}
		s.last = max(s.last, t.ArrivalOffsetNs)
	}
	c.rows = nil
	return conv, nil
}

// closedError refuses a row that would join a conversation already closed.
func (s *rowStream) closedError(r importRow, field, what string, _ *openConv) error {
	return fieldErr("ImportOptions", "GroupWindow", "%w", &RowError{File: s.o.Path, Line: r.line, Field: field,
		Err: fmt.Errorf("%s continues a conversation whose last turn was more than the grouping window (%v) earlier, so it was already written; widen the window",
			what, time.Duration(s.window))})
}

// checkSize refuses prompt text past MaxBytes; virtual prompts hold none.
func (s *rowStream) checkSize() error {
	if s.virtual {
		return nil
	}
	return checkSize("ImportOptions", s.tokens*s.blocks.BytesPerToken(), s.o.MaxBytes,
		fmt.Sprintf("%d %s requests of %.0f prompt tokens so far", s.requests, s.src, s.tokens))
}

// pendingRows hold the rows not yet released, in (timestamp, line) order:
// a FIFO while the file is in time order (the common case, no sifting), a
// heap from the first row out of order on.
type pendingRows struct {
	fifo   []importRow
	head   int
	h      rowHeap
	sorted bool // h is in use
}

func (p *pendingRows) len() int {
	if p.sorted {
		return len(p.h)
	}
	return len(p.fifo) - p.head
}

func (p *pendingRows) push(r importRow) {
	if !p.sorted {
		if n := len(p.fifo); n == p.head || !rowLess(r, p.fifo[n-1]) {
			if p.head > 4096 && p.head > n/2 {
				p.fifo = append(p.fifo[:0], p.fifo[p.head:]...)
				p.head = 0
			}
			p.fifo = append(p.fifo, r)
			return
		}
		p.h = append(rowHeap(nil), p.fifo[p.head:]...)
		p.fifo, p.head, p.sorted = nil, 0, true
		heap.Init(&p.h)
	}
	heap.Push(&p.h, r)
}

func (p *pendingRows) first() importRow {
	if p.sorted {
		return p.h[0]
	}
	return p.fifo[p.head]
}

func (p *pendingRows) pop() importRow {
	if p.sorted {
		return heap.Pop(&p.h).(importRow)
	}
	r := p.fifo[p.head]
	p.fifo[p.head] = importRow{}
	p.head++
	return r
}

func rowLess(a, b importRow) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.line < b.line
}

// rowHeap orders rows by (timestamp, line).
type rowHeap []importRow

func (h rowHeap) Len() int           { return len(h) }
func (h rowHeap) Less(i, j int) bool { return rowLess(h[i], h[j]) }
func (h rowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rowHeap) Push(x any)        { *h = append(*h, x.(importRow)) }
func (h *rowHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

var _ heap.Interface = (*rowHeap)(nil)

// writeStream is Generate's path for a Streamer: conversations are written
// as they come into a temporary file renamed to path at the end (over an
// existing one only with replace).
func writeStream(ctx context.Context, path string, replace bool, meta trace.TraceMeta, s Streamer, finish func(Conversation), res *Result) error {
	f, err := createTrace(path, replace, meta, false)
	if err != nil {
		return &OutputError{Err: err}
	}
	var outErr error
	err = s.Stream(ctx, func(c Conversation) error {
		if len(c) == 0 {
			return nil
		}
		finish(c)
		if err := f.write(c); err != nil {
			outErr = err
			return err
		}
		res.Conversations++
		res.Turns += len(c)
		return ctx.Err()
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		f.abort()
		if outErr != nil && ctx.Err() == nil {
			return &OutputError{Err: outErr}
		}
		return err
	}
	if rep, ok := s.(Reporter); ok {
		res.Report = rep.Report()
	}
	if res.Conversations == 0 {
		f.abort()
		return fmt.Errorf("%s source: %w", s.Name(), ErrNoConversations)
	}
	if p, ok := s.(Prompter); ok {
		meta.Prompts = p.Prompts()
	}
	if err := f.commit(withReport(meta, s.Name(), res.Report)); err != nil {
		return &OutputError{Err: err}
	}
	return nil
}
