package replay

import (
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/tracekit/tracekit/internal/blocktext"
	"github.com/tracekit/tracekit/trace"
)

// prefetchConvs is how many conversations the prefetch stage holds made
// ahead of the dispatcher.
const prefetchConvs = 64

// materializer makes the text of a trace's virtual messages
// (trace.Message.Virtual) with the generator the trace names
// (trace.TraceMeta.Prompts): the same function of the same fields synth
// used when it stored text, so the bytes sent are those of the
// equivalent --prompt-text trace.
type materializer struct {
	blocks *blocktext.Blocks
	made   atomic.Int64 // messages whose text was made: the tests' count
}

// newMaterializer returns the trace's materializer, nil when it has no
// virtual prompts. A generator this build does not know is refused: other
// text would be a different benchmark.
func newMaterializer(meta trace.TraceMeta) (*materializer, error) {
	g := meta.Prompts
	if g == nil {
		return nil, nil
	}
	if g.Name != trace.PromptGeneratorBlocks {
		return nil, fmt.Errorf("the trace's virtual prompts are made by generator %q, which this tracekit does not know (it knows %q)", g.Name, trace.PromptGeneratorBlocks)
	}
	b, err := blocktext.DefaultBlocks(g.Tokenizer, g.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("preparing the trace's virtual prompts: %w", err)
	}
	return &materializer{blocks: b}, nil
}

// fill returns conv with the text of its virtual messages made. The turns
// and messages that change are copies: a MemorySource's caller keeps its
// own.
func (m *materializer) fill(conv []trace.Turn) []trace.Turn {
	copied := false
	for i := range conv {
		var msgs []trace.Message
		for j, msg := range conv[i].Messages {
			if !msg.Virtual || msg.Content != "" {
				continue
			}
			if !copied {
				conv, copied = slices.Clone(conv), true
			}
			if msgs == nil {
				msgs = slices.Clone(conv[i].Messages)
			}
			hashes := conv[i].PrefixHashes
			m.made.Add(1)
			msgs[j].Content = m.blocks.Text(hashes[min(max(int(msg.BlockStart), 0), len(hashes)):], int(msg.Tokens), msg.BlockSeed)
		}
		if msgs != nil {
			conv[i].Messages = msgs
		}
	}
	return conv
}

// prefetch is the run's look-ahead between the trace source and feed (the
// dispatcher's side): one goroutine takes conversations from the source,
// makes the text of their virtual messages and hands them over through a
// buffer of prefetchConvs, so no text is made on the dispatch path. It is
// a Source for feed; stop ends the goroutine and waits for it. Another
// shard's conversations pass through as they are: prime and feed skip
// them, and their text would be made for nothing.
type prefetch struct {
	src  Source
	mat  *materializer
	mine func([]trace.Turn) bool
	ch   chan prefetched
	quit chan struct{}
	done chan struct{}
}

type prefetched struct {
	conv []trace.Turn
	err  error
}

var _ Source = (*prefetch)(nil)

// input is what feed reads: the source itself when the trace has no
// virtual prompts, else a prefetch stage over it. stop is the run's to
// call when it ends.
func (r *Runner) input() (in Source, stop func()) {
	if r.mat == nil {
		return r.src, func() {}
	}
	p := &prefetch{src: r.src, mat: r.mat, mine: r.mine, ch: make(chan prefetched, prefetchConvs), quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p, func() { close(p.quit); <-p.done }
}

func (p *prefetch) run() {
	defer close(p.done)
	defer close(p.ch)
	for {
		conv, err := p.src.Next()
		if err == io.EOF {
			return
		}
		if err == nil && len(conv) > 0 && p.mine(conv) {
			conv = p.mat.fill(conv)
		}
		select {
		case p.ch <- prefetched{conv, err}:
		case <-p.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// Next implements Source.
func (p *prefetch) Next() ([]trace.Turn, error) {
	it, ok := <-p.ch
	if !ok {
		return nil, io.EOF
	}
	return it.conv, it.err
}

// Meta implements Source.
func (p *prefetch) Meta() trace.TraceMeta { return p.src.Meta() }

// Len implements Source.
func (p *prefetch) Len() int64 { return p.src.Len() }
