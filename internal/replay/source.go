package replay

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/tracekit/tracekit/trace"
)

// A Source yields the conversations a run replays, one at a time, in start
// order (trace.Turn.StartOffsetNs, as a trace file holds them).
type Source interface {
	// Next returns the next conversation's turns in turn order, or io.EOF
	// after the last. The run keeps the slice: Next must not reuse it.
	Next() ([]trace.Turn, error)
	// Meta is the trace's metadata (its tokenizer counts history tokens).
	Meta() trace.TraceMeta
	// Len is the number of turns the source holds (requests, for progress).
	Len() int64
}

var (
	_ Source = (*FileSource)(nil)
	_ Source = (*MemorySource)(nil)
)

// sourceBatch is how many rows a FileSource reads at a time.
const sourceBatch = 256

// FileSource streams a trace file: it holds one batch of rows and the
// conversation being assembled, never the whole trace.
type FileSource struct {
	path    string
	tr      *trace.TraceReader
	pending []trace.Turn // rows read and not yet returned
	rows    int64        // rows read so far
	eof     bool
	err     error // the read error after pending
}

// TraceError is the error of a trace file that turned out unreadable
// midway (a damaged page, an invalid row): bad input, met after the run
// started. Rows is how many rows were read before it.
type TraceError struct {
	Path string
	Rows int64
	Err  error
}

func (e *TraceError) Error() string {
	return fmt.Sprintf("reading the trace %s after row %d: %v", e.Path, e.Rows, e.Err)
}
func (e *TraceError) Unwrap() error { return e.Err }

// OpenFile opens a trace file as a Source, after checking every page of it
// (trace.TraceReader.VerifyPages: no decoding, as fast as the disk), so a
// damaged file fails here, before a run creates anything; Close releases
// it.
func OpenFile(path string) (*FileSource, error) {
	tr, err := trace.OpenTrace(path)
	if err != nil {
		return nil, fmt.Errorf("opening the trace: %w", err)
	}
	if err := tr.VerifyPages(); err != nil {
		tr.Close()
		return nil, fmt.Errorf("checking the trace: %w (the file was damaged after it was written: write it again)", err)
	}
	return &FileSource{path: path, tr: tr}, nil
}

// Next implements Source.
func (s *FileSource) Next() ([]trace.Turn, error) {
	var conv []trace.Turn
	for {
		for i, t := range s.pending {
			if len(conv) > 0 && t.ConversationID != conv[0].ConversationID {
				s.pending = s.pending[i:]
				return conv, nil
			}
			conv = append(conv, t)
		}
		s.pending = nil
		if s.err != nil {
			return nil, s.err // the conversation cut by the error is not replayed
		}
		if s.eof {
			if len(conv) == 0 {
				return nil, io.EOF
			}
			return conv, nil
		}
		// A fresh batch each time: the reader may reuse the lists of the
		// rows it is given, and earlier conversations still hold theirs.
		batch := make([]trace.Turn, sourceBatch)
		n, err := s.tr.Read(batch)
		s.pending = batch[:n]
		if errors.Is(err, io.EOF) {
			s.eof = true
		} else if err != nil {
			s.err = &TraceError{Path: s.path, Rows: s.rows + int64(n), Err: err}
		}
		s.rows += int64(n)
	}
}

// Meta implements Source.
func (s *FileSource) Meta() trace.TraceMeta { return s.tr.Meta }

// Len implements Source.
func (s *FileSource) Len() int64 { return s.tr.NumRows() }

// Close releases the file.
func (s *FileSource) Close() error { return s.tr.Close() }

// MemorySource replays turns held in memory (calibrate's generated steps,
// tests).
type MemorySource struct {
	meta  trace.TraceMeta
	turns []trace.Turn
	next  int
}

// NewMemorySource returns a Source of turns, which must be in a trace
// file's order: conversations in start order, each one's turns together
// in turn order. The source does not copy turns.
func NewMemorySource(meta trace.TraceMeta, turns []trace.Turn) *MemorySource {
	return &MemorySource{meta: meta, turns: turns}
}

// Next implements Source.
func (s *MemorySource) Next() ([]trace.Turn, error) {
	if s.next >= len(s.turns) {
		return nil, io.EOF
	}
	i := s.next
	j := i + 1
	for j < len(s.turns) && s.turns[j].ConversationID == s.turns[i].ConversationID {
		j++
	}
	s.next = j
	return s.turns[i:j:j], nil
}

// Meta implements Source.
func (s *MemorySource) Meta() trace.TraceMeta { return s.meta }

// Len implements Source.
func (s *MemorySource) Len() int64 { return int64(len(s.turns)) }

// primeRows is how many of its own turns a run reads from its source
// before its clock starts: a file source's read batch.
const primeRows = sourceBatch

// primeBytes bounds what the primed conversations beyond the first hold
// (contentBytes): read through the look-ahead, each conversation's media
// are made as it is read, and primeRows conversations of two 1024x1024
// JPEGs each held about 750 MB before the clock started.
const primeBytes = 32 << 20

// aheadBudget is how many bytes of contents the conversations read ahead
// of their dispatch may hold: prime's before the clock starts (primeBytes)
// and the look-ahead's queue (prefetchBytes). A run holds at most their sum
// beyond the conversations under way, plus one conversation each.
type aheadBudget struct{ prime, prefetch int }

// primeFillTokens bounds the filler text primed first turns may hold (about
// 5 bytes a token), so a trace of huge redacted prompts stays bounded.
const primeFillTokens = 1 << 20

// primed is a Source whose first conversations were read before the run's
// clock started (Runner.prime); Next hands them out first, then reads on.
type primed struct {
	Source
	head [][]trace.Turn
	err  error // the source's error (io.EOF included) after head
}

// Next implements Source.
func (p *primed) Next() ([]trace.Turn, error) {
	if len(p.head) > 0 {
		c := p.head[0]
		p.head[0], p.head = nil, p.head[1:]
		return c, nil
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.Source.Next()
}

// headroom is how far after now the run's clock must start so that no
// conversation in p.head whose first turn carries media is launched later
// than launchLead before its start: its body of megabytes is encoded after
// its goroutine starts, and at offset 0 that took 8-11 ms, which was
// recorded as the first request's dispatch lag. Text conversations keep
// the clock starting at once: a start 5 ms ahead for them made the
// saturated calibrate step (1,000 streams on one client CPU) fail, stamps
// one inter-token time late at p99, for a reason not found. The
// conversations past the head have their lead from the schedule itself.
func (p *primed) headroom(scale func(int64) int64) int64 {
	var h int64
	for _, conv := range p.head {
		if mediaOf(conv[0].Messages).bytes > 0 {
			h = max(h, launchLead(conv)-scale(conv[0].StartOffsetNs))
		}
	}
	return h
}

// prime reads this shard's first conversations, up to primeRows turns and
// r.ahead.prime bytes of contents (the first conversation always), and
// fills their first turns' redacted contents, all before the run's clock
// starts (Run calls it before the start barrier): the conversations
// at the start of the schedule are then launched from memory, their
// lateness (slot - intended) is the dispatcher's alone, and a shard that
// skips the other shards' conversations has skipped those of its first
// batch already. A read error is kept for after the conversations read
// before it, as feed would have met it.
func (r *Runner) prime(in Source) *primed {
	p := &primed{Source: in} // the run's input: the file or its materializing prefetch stage (materialize.go)
	rows, fill, held := 0, 0, 0
	// Skipped rows are bounded too (4 batches per shard: a shard gets about
	// 1/Shards of them), so a shard that owns few conversations of a long
	// trace does not read it whole before its barrier.
	skipLimit := 4 * primeRows * max(r.cfg.Shards, 1)
	for skipped := 0; rows < primeRows && held < r.ahead.prime && skipped < skipLimit; {
		conv, err := in.Next()
		if err != nil {
			p.err = err
			break
		}
		if len(conv) == 0 || !r.mine(conv) {
			skipped += len(conv)
			continue
		}
		if fill < primeFillTokens {
			var n int
			conv, n = r.fillRedacted(conv)
			fill += n
		}
		p.head = append(p.head, conv)
		rows += len(conv)
		held += contentBytes(conv)
	}
	return p
}

// contentBytes is what conv's messages hold: their text, and their media's
// bytes and base64.
func contentBytes(conv []trace.Turn) int {
	n := 0
	for i := range conv {
		for j := range conv[i].Messages {
			m := &conv[i].Messages[j]
			n += len(m.Content)
			for k := range m.Media {
				n += len(m.Media[k].Data) + len(m.Media[k].Base64)
			}
		}
	}
	return n
}

// mine reports whether conv belongs to this run's shard.
func (r *Runner) mine(conv []trace.Turn) bool {
	return r.cfg.Shards <= 1 || int(hash(conv[0].ConversationID)%uint64(r.cfg.Shards)) == r.cfg.Shard
}

// fillRedacted returns conv with the text of its first turn's redacted
// messages (content empty, tokens known) set to what messages would
// synthesize for them, and the tokens filled. It writes to copies: the
// source's turns may be its caller's (MemorySource).
func (r *Runner) fillRedacted(conv []trace.Turn) ([]trace.Turn, int) {
	n := 0
	var msgs []trace.Message
	t := &conv[0]
	for i, m := range t.Messages {
		if m.Content != "" || m.Tokens <= 0 {
			continue
		}
		if msgs == nil {
			msgs = slices.Clone(t.Messages)
		}
		msgs[i].Content = r.filler(t, i)
		n += int(m.Tokens)
	}
	if msgs == nil {
		return conv, 0
	}
	conv = slices.Clone(conv)
	conv[0].Messages = msgs
	return conv, n
}
