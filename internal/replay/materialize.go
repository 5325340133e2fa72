package replay

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tracekit/tracekit/internal/blocktext"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// The prefetch stage holds at most prefetchConvs conversations and, beyond
// the first, at most prefetchBytes of made text ahead of the dispatcher.
const (
	prefetchConvs = 1 << 14
	prefetchBytes = 64 << 20
)

// materializer makes the text of a trace's virtual messages
// (trace.Message.Virtual) with the generator the trace names
// (trace.TraceMeta.Prompts): the same function of the same fields synth
// used when it stored text, so the bytes sent are those of the
// equivalent --prompt-text trace.
type materializer struct {
	blocks *blocktext.Blocks
	made   atomic.Int64 // messages whose text was made: the tests' count
	lastNs atomic.Int64 // clock.Mono() at the last one made: the tests' too
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

// fill returns conv with the text of its virtual messages made, and the
// bytes made. The turns and messages that change are copies: a
// MemorySource's caller keeps its own.
func (m *materializer) fill(conv []trace.Turn) ([]trace.Turn, int) {
	copied, n := false, 0
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
			n += len(msgs[j].Content)
			m.lastNs.Store(clock.Mono())
		}
		if msgs != nil {
			conv[i].Messages = msgs
		}
	}
	return conv, n
}

// prefetch is the run's look-ahead between the trace source and feed (the
// dispatcher's side): one goroutine takes conversations from the source,
// makes the text of their virtual messages and queues them for Next, so no
// text is made on the dispatch path. The queue is bounded by the text it
// holds (prefetchBytes) and by its length (prefetchConvs), not by a few
// conversations: it runs as far ahead as that memory allows, so the text of
// a burst is made well before the burst, not while the dispatcher sends it
// on the same cores. The first Next (prime's, before the run's clock)
// waits until the queue is full or the source ended: the text of the
// first 64 MiB is made before the clock starts, not during the first
// dispatches. It is a Source for feed; stop ends the goroutine and
// waits for it. Another shard's conversations pass through as they are:
// prime and feed skip them, and their text would be made for nothing.
type prefetch struct {
	src  Source
	mat  *materializer
	mine func([]trace.Turn) bool
	done chan struct{}

	mu     sync.Mutex
	cond   sync.Cond // queue changed, ended or quit
	q      []prefetched
	bytes  int  // text made for the queued conversations
	ended  bool // the goroutine queues nothing more
	full   bool // the goroutine waits for room
	primed bool // the first Next returned
	quit   bool // stop was called
	maxLen int
	maxB   int
}

type prefetched struct {
	conv  []trace.Turn
	err   error
	bytes int
}

var _ Source = (*prefetch)(nil)

// input is what feed reads: the source itself when the trace has no
// virtual prompts, else a prefetch stage over it. stop is the run's to
// call when it ends.
func (r *Runner) input() (in Source, stop func()) {
	if r.mat == nil {
		return r.src, func() {}
	}
	p := newPrefetch(r.src, r.mat, r.mine, prefetchConvs, prefetchBytes)
	return p, p.stop
}

func newPrefetch(src Source, mat *materializer, mine func([]trace.Turn) bool, maxLen, maxBytes int) *prefetch {
	p := &prefetch{src: src, mat: mat, mine: mine, done: make(chan struct{}), maxLen: maxLen, maxB: maxBytes}
	p.cond.L = &p.mu
	go p.run()
	return p
}

func (p *prefetch) run() {
	defer close(p.done)
	defer func() {
		p.mu.Lock()
		p.ended = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	for {
		conv, err := p.src.Next()
		if err == io.EOF {
			return
		}
		n := 0
		if err == nil && len(conv) > 0 && p.mine(conv) {
			conv, n = p.mat.fill(conv)
		}
		p.mu.Lock()
		// The first conversation always fits, so one larger than the
		// budget is not a deadlock.
		for !p.quit && len(p.q) > 0 && (len(p.q) >= p.maxLen || p.bytes+n > p.maxB) {
			if !p.full {
				p.full = true
				p.cond.Broadcast()
			}
			p.cond.Wait()
		}
		p.full = false
		if p.quit {
			p.mu.Unlock()
			return
		}
		p.q = append(p.q, prefetched{conv, err, n})
		p.bytes += n
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// stop ends the goroutine (after the source read under way, if any) and
// waits for it.
func (p *prefetch) stop() {
	p.mu.Lock()
	p.quit = true
	p.cond.Broadcast()
	p.mu.Unlock()
	<-p.done
}

// Next implements Source.
func (p *prefetch) Next() ([]trace.Turn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.ended && (len(p.q) == 0 || !p.primed && !p.full) {
		p.cond.Wait()
	}
	p.primed = true
	if len(p.q) == 0 {
		return nil, io.EOF
	}
	it := p.q[0]
	p.q[0] = prefetched{}
	p.q = p.q[1:]
	if len(p.q) == 0 {
		p.q = p.q[:0:0] // let the drained backing array go
	}
	p.bytes -= it.bytes
	p.cond.Broadcast()
	return it.conv, it.err
}

// Meta implements Source.
func (p *prefetch) Meta() trace.TraceMeta { return p.src.Meta() }

// Len implements Source.
func (p *prefetch) Len() int64 { return p.src.Len() }
