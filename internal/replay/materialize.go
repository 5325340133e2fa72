package replay

import (
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tracekit/tracekit/internal/blocktext"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/procs"
	"github.com/tracekit/tracekit/trace"
)

// The prefetch stage holds at most prefetchConvs conversations and, beyond
// the first, at most prefetchBytes of made text and media ahead of the
// dispatcher (Runner.ahead).
// Once the run has started and it holds idleAhead conversations, it makes
// media in the idle scheduling class; with fewer, or before the clock, at
// nice 19, so that a busy machine does not leave the look-ahead dry.
const (
	prefetchConvs = 1 << 14
	prefetchBytes = 64 << 20
	idleAhead     = 4
)

// materializer makes what a trace holds only virtually, before requests
// are due: the text of virtual messages (trace.Message.Virtual) with the
// generator the trace names (trace.TraceMeta.Prompts), the same function
// of the same fields synth used when it stored text, so the bytes sent are
// those of the equivalent --prompt-text trace; and the bytes of media
// items into trace.Media.Data: a virtual item's made (internal/media), a
// real item's loaded from the trace's media file and verified.
type materializer struct {
	blocks *blocktext.Blocks // nil when the trace has no virtual prompts
	media  bool              // some message carries media
	made   atomic.Int64      // messages whose text was made: the tests' count
	lastNs atomic.Int64      // clock.Mono() at the last one made: the tests' too
	items  atomic.Int64      // media items made: the tests' count
	urls   *mediaServer      // when set, items are sent as its URLs
	store  *trace.MediaStore // real items' bytes; nil when the trace has none
	// workers is how many threads make media at once: one fewer than the
	// process's Ps when it was made, at least one. A run with media adds
	// as many Ps (heldPs), so the makers never hold the Ps the dispatcher
	// and the read loops run on.
	workers int
	job     atomic.Pointer[mediaJob] // the media being made, nil between conversations
	waiting atomic.Bool              // the run waits for the look-ahead (prefetch.Next)
	running sync.WaitGroup           // the media workers
}

// newMaterializer returns the trace's materializer, nil when it has no
// virtual prompts and hasMedia is false. A generator this build does not
// know is refused: other text would be a different benchmark.
func newMaterializer(meta trace.TraceMeta, hasMedia bool) (*materializer, error) {
	g := meta.Prompts
	if g == nil {
		if !hasMedia {
			return nil, nil
		}
		return &materializer{media: true, workers: mediaWorkers()}, nil
	}
	if g.Name != trace.PromptGeneratorBlocks {
		return nil, fmt.Errorf("the trace's virtual prompts are made by generator %q, which this tracekit does not know (it knows %q)", g.Name, trace.PromptGeneratorBlocks)
	}
	b, err := blocktext.DefaultBlocks(g.Tokenizer, g.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("preparing the trace's virtual prompts: %w", err)
	}
	return &materializer{blocks: b, media: hasMedia, workers: mediaWorkers()}, nil
}

// mediaWorkers is one fewer than the process's Ps (those it has for its
// ordinary goroutines: internal/procs), at least one.
func mediaWorkers() int { return max(1, procs.Base()-1) }

// heldPs is how many Ps m's media workers hold while they run: none
// without media. An image of a megapixel takes tens of milliseconds of CPU
// to encode, and its worker holds its P that long: with GOMAXPROCS at 1
// (a client pinned to one CPU) the dispatcher then waited for the
// encoder's preemption, and requests left 33 ms late at p99 (0.6 ms for
// text). A run adds as many Ps (internal/procs): the workers then compete
// for the CPUs only in the kernel, where their low priority puts the
// dispatcher first.
func (m *materializer) heldPs() int {
	if m == nil || !m.media {
		return 0
	}
	return m.workers
}

// fill returns conv with the text of its virtual messages and the bytes
// of its media made or loaded, and the bytes made. The turns, messages and
// media that change are copies: a MemorySource's caller keeps its own. An
// item that cannot be made or loaded (a real item whose stored bytes do not
// match its hash) is an error naming it. idle makes the media at the idle
// scheduling class (see backgroundThread): the look-ahead is far enough
// ahead that any other thread may go first. pause, when not nil, is called
// by the media workers between small steps of their work (makeMedia).
func (m *materializer) fill(conv []trace.Turn, idle bool, pause func()) ([]trace.Turn, int, error) {
	copied, n := false, 0
	var todo []mediaTodo
	for i := range conv {
		var msgs []trace.Message
		for j, msg := range conv[i].Messages {
			text := m.blocks != nil && msg.Virtual && msg.Content == ""
			media := m.media && needsData(msg.Media)
			if !text && !media {
				continue
			}
			if !copied {
				conv, copied = slices.Clone(conv), true
			}
			if msgs == nil {
				msgs = slices.Clone(conv[i].Messages)
			}
			if media {
				msgs[j].Media = slices.Clone(msg.Media)
				for k := range msgs[j].Media {
					if msgs[j].Media[k].Data == "" {
						todo = append(todo, mediaTodo{&msgs[j].Media[k], sendsBase64(conv[i].Endpoint)})
					}
				}
			}
			if !text {
				continue
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
	if len(todo) == 0 {
		return conv, n, nil
	}
	made, err := m.makeMedia(todo, idle, pause)
	if err != nil && len(conv) > 0 {
		err = fmt.Errorf("conversation %q: %w", conv[0].ConversationID, err)
	}
	m.items.Add(int64(len(todo)))
	m.lastNs.Store(clock.Mono())
	return conv, n + made, err
}

// mediaTodo is an item to make or load, and whether its request carries
// it in base64 (every API but the speech uploads, which send the bytes).
type mediaTodo struct {
	it     *trace.Media
	base64 bool
}

func sendsBase64(endpoint string) bool {
	return endpoint != trace.EndpointTranscriptions && endpoint != trace.EndpointTranslations
}

func needsData(items []trace.Media) bool {
	for i := range items {
		if items[i].Data == "" {
			return true
		}
	}
	return false
}

// makeMedia makes the bytes of virtual items and loads those of real ones
// from store (verified against their hash), with their base64 when the
// request carries them so, and returns the bytes made; with urls, each is
// also kept there and sent as its URL. An image of a megapixel takes tens
// of milliseconds to encode, so it runs on up to m.workers goroutines, each
// on a thread of the lowest priority (so the kernel runs the dispatcher
// first on a busy machine; idle: the idle class, see backgroundThread).
// While the run waits for the look-ahead (m.waiting), they are made on
// the calling goroutine instead. It returns when every item is made; a
// worker still on an item someone else made (mediaJob.help) ends at its
// next step, and prefetch.stop waits for it (m.running). The base64 is
// made here because encoding megabytes while building the body would
// hold the P the next dispatch needs; building it is then a copy. pause,
// when not nil, is called between steps of the work: before each item,
// between steps of a fraction of a millisecond while making it, and
// before its base64.
func (m *materializer) makeMedia(items []mediaTodo, idle bool, pause func()) (int, error) {
	if pause == nil {
		pause = func() {}
	}
	j := newMediaJob(items, m.urls, m.store)
	m.job.Store(j) // before waiting is read: see prefetch.Next
	defer m.job.Store(nil)
	if m.waiting.Load() {
		j.help()
	} else {
		for range min(len(items), max(1, m.workers)) {
			m.running.Go(func() { j.work(idle, pause) })
		}
	}
	<-j.done
	return j.result()
}

// base64String is b in standard base64, in one allocation
// (EncodeToString makes two: its buffer and the string's copy of it).
func base64String(b []byte) string {
	buf := base64.StdEncoding.AppendEncode(make([]byte, 0, base64.StdEncoding.EncodedLen(len(b))), b)
	return unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is not written again
}

// scratchPool holds the buffers makeMedia's workers make items' bytes in
// (*[]byte): the bytes are copied into the item's Data, and a buffer of a
// megabyte left as garbage for every item would be collected while the
// run sends requests.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// itemBytes makes a virtual item's bytes (appended to dst), calling pause
// (when not nil) between steps, or loads a real one's.
func itemBytes(dst []byte, it *trace.Media, store *trace.MediaStore, pause func()) ([]byte, error) {
	if it.Hash == "" {
		b, err := media.MakeYielding(dst, it, pause)
		if err != nil {
			return nil, fmt.Errorf("media item (%s %s, seed %d): %w", it.Kind, it.Format, it.Seed, err)
		}
		return b, nil
	}
	if store == nil {
		return nil, fmt.Errorf("media item (%s %s, sha256 %s): no media file holds it", it.Kind, it.Format, it.Hash)
	}
	b, err := store.Load(it.Hash)
	if err != nil {
		return nil, fmt.Errorf("media item (%s %s): %w", it.Kind, it.Format, err)
	}
	return b, nil
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
	// ahead is len(q) once primed, 0 before: the queue's depth for
	// readers without mu (mediaGate).
	ahead atomic.Int32
	pause func() // given to fill; nil: the media workers never pause
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
	c, _ := r.disp.(dueClock)
	p := newPrefetch(r.src, r.mat, r.mine, prefetchConvs, r.ahead.prefetch, c)
	return p, p.stop
}

// newPrefetch starts the look-ahead. With c, its media workers pause
// around the instants c's waiters are due (mediaGate).
func newPrefetch(src Source, mat *materializer, mine func([]trace.Turn) bool, maxLen, maxBytes int, c dueClock) *prefetch {
	p := &prefetch{src: src, mat: mat, mine: mine, done: make(chan struct{}), maxLen: maxLen, maxB: maxBytes}
	if c != nil && mat.media {
		p.pause = (&mediaGate{clock: c, ahead: p.wellAhead}).pause
	}
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
			conv, n, err = p.mat.fill(conv, p.wellAhead(), p.pause)
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
		p.setAhead()
		p.bytes += n
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// stop ends the goroutine (after the source read under way, if any) and
// waits for it and for the media workers.
func (p *prefetch) stop() {
	p.mu.Lock()
	p.quit = true
	p.cond.Broadcast()
	p.mu.Unlock()
	<-p.done
	p.mat.running.Wait()
}

// Next implements Source.
func (p *prefetch) Next() ([]trace.Turn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var helped *mediaJob
	for !p.ended && (len(p.q) == 0 || !p.primed && !p.full) {
		if p.primed {
			// The run waits for the look-ahead: the media under way are
			// made here, at the dispatcher's priority, not left to workers
			// a busy machine may starve; those of a conversation begun
			// while it waits are made so too (makeMedia).
			p.mat.waiting.Store(true)
			if j := p.mat.job.Load(); j != nil && j != helped {
				helped = j
				p.mu.Unlock()
				j.help()
				p.mu.Lock()
				continue
			}
		}
		p.cond.Wait()
	}
	p.mat.waiting.Store(false)
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
	p.setAhead()
	p.cond.Broadcast()
	return it.conv, it.err
}

// setAhead publishes the queue's depth once primed. p.mu must be held.
func (p *prefetch) setAhead() {
	if p.primed {
		p.ahead.Store(int32(len(p.q)))
	}
}

// wellAhead reports whether the run has started and the queue holds at
// least idleAhead conversations: the media are then made in the idle
// class, and mediaGate pauses them around due requests.
func (p *prefetch) wellAhead() bool { return p.ahead.Load() >= idleAhead }

// Meta implements Source.
func (p *prefetch) Meta() trace.TraceMeta { return p.src.Meta() }

// Len implements Source.
func (p *prefetch) Len() int64 { return p.src.Len() }

// convHasMedia reports whether a message of conv carries media.
func convHasMedia(conv []trace.Turn) bool {
	for i := range conv {
		for j := range conv[i].Messages {
			if len(conv[i].Messages[j].Media) > 0 {
				return true
			}
		}
	}
	return false
}

// tally is media items and their bytes, in all and by kind: what a
// request sends of media (trace.Record.MediaItems, MediaBytes and the
// columns by kind).
type tally struct {
	items   int32
	bytes   int64
	audioMs int64       // the audio clips' length (Media.DurationMs)
	kind    [3]struct { // by kindIndex
		items int32
		bytes int64
	}
}

// kindIndex places a media kind in tally.kind.
func kindIndex(kind string) int {
	switch kind {
	case trace.MediaVideo:
		return 1
	case trace.MediaAudio:
		return 2
	}
	return 0
}

// plus is t and u together.
func (t tally) plus(u tally) tally {
	t.items, t.bytes, t.audioMs = t.items+u.items, t.bytes+u.bytes, t.audioMs+u.audioMs
	for k := range t.kind {
		t.kind[k].items += u.kind[k].items
		t.kind[k].bytes += u.kind[k].bytes
	}
	return t
}

// fill sets rec's media columns.
func (t tally) fill(rec *trace.Record) {
	rec.MediaItems, rec.MediaBytes = t.items, t.bytes
	rec.ImageItems, rec.ImageBytes = t.kind[0].items, t.kind[0].bytes
	rec.VideoItems, rec.VideoBytes = t.kind[1].items, t.kind[1].bytes
	rec.AudioItems, rec.AudioBytes, rec.AudioMs = t.kind[2].items, t.kind[2].bytes, t.audioMs
}

// mediaOf tallies the media of msgs.
func mediaOf(msgs []trace.Message) tally {
	var t tally
	for i := range msgs {
		for j := range msgs[i].Media {
			m := &msgs[i].Media[j]
			k := &t.kind[kindIndex(m.Kind)]
			k.items++
			k.bytes += int64(len(m.Data))
			t.items++
			t.bytes += int64(len(msgs[i].Media[j].Data))
			if m.Kind == trace.MediaAudio {
				t.audioMs += int64(m.DurationMs)
			}
		}
	}
	return t
}
