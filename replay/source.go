package replay

import (
	"errors"
	"fmt"
	"io"

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
	tr      *trace.TraceReader
	pending []trace.Turn // rows read and not yet returned
	eof     bool
	err     error // the read error after pending
}

// OpenFile opens a trace file as a Source; Close releases it.
func OpenFile(path string) (*FileSource, error) {
	tr, err := trace.OpenTrace(path)
	if err != nil {
		return nil, fmt.Errorf("opening the trace: %w", err)
	}
	return &FileSource{tr: tr}, nil
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
			s.err = err
		}
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
