package replay

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/media"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/synth"
	"github.com/tracekit/tracekit/trace"
)

// importBoth writes one input as a virtual trace (the default) and as a
// --prompt-text trace.
func importBoth(t *testing.T, make func(o synth.ImportOptions) synth.Source, path string) (virt, text string) {
	t.Helper()
	dir := t.TempDir()
	for i, promptText := range []bool{false, true} {
		out := filepath.Join(dir, []string{"virtual.parquet", "text.parquet"}[i])
		src := make(synth.ImportOptions{Path: path, PromptText: promptText})
		if _, err := synth.Generate(context.Background(), synth.Job{Source: src, Meta: trace.TraceMeta{Tokenizer: "o200k_base"}, Output: out}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			virt = out
		} else {
			text = out
		}
	}
	return virt, text
}

// bodiesOf replays path against a fresh mock and returns every request
// body by request id.
func bodiesOf(t *testing.T, path string) map[string]string {
	t.Helper()
	srv := mocktest.Start(t, nil)
	_, res := run(t, Config{Trace: path, Targets: []string{srv.URL()}, IgnoreEOS: true, ContinuousUsage: "off", Speed: 50})
	if res.Errors != 0 {
		t.Fatalf("%s: %d errors", path, res.Errors)
	}
	bodies := map[string]string{}
	for _, e := range srv.Log() {
		bodies[e.RequestID] = string(e.Body)
	}
	return bodies
}

// A replay of a virtual trace sends the same bytes as a replay of the same
// import with its text stored: every request body, history included, is
// equal. The virtual file holds no prompt text.
func TestVirtualTraceSendsTheSameBodies(t *testing.T) {
	dir := t.TempDir()
	mooncake := filepath.Join(dir, "m.jsonl")
	os.WriteFile(mooncake, []byte(`{"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]}
{"timestamp": 10, "input_length": 1300, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 20, "input_length": 9, "output_length": 3}
`), 0o644)
	bailian := filepath.Join(dir, "b.jsonl")
	os.WriteFile(bailian, []byte(`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 10, "hash_ids": [100, 101, 102]}
{"chat_id": 3, "parent_chat_id": 1, "timestamp": 1.5, "input_length": 90, "output_length": 8, "hash_ids": [100, 101, 104, 105, 106, 107]}
{"chat_id": 4, "parent_chat_id": -1, "timestamp": 1.6, "input_length": 20, "output_length": 8, "hash_ids": [100]}
`), 0o644)
	cases := []struct {
		name, path string
		make       func(o synth.ImportOptions) synth.Source
	}{
		{"mooncake", mooncake, func(o synth.ImportOptions) synth.Source { return &synth.Mooncake{Opts: o} }},
		{"bailian", bailian, func(o synth.ImportOptions) synth.Source { return &synth.Bailian{Opts: o} }},
	}
	for _, c := range cases {
		virt, text := importBoth(t, c.make, c.path)
		turns, meta, err := trace.ReadTurns(virt)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Prompts == nil {
			t.Fatalf("%s: the virtual trace names no prompt generator", c.name)
		}
		for _, tu := range turns {
			for _, m := range tu.Messages {
				if !m.Virtual || m.Content != "" {
					t.Fatalf("%s: message of %s/%d holds text or is not virtual", c.name, tu.ConversationID, tu.Turn)
				}
			}
		}
		vb, tb := bodiesOf(t, virt), bodiesOf(t, text)
		n := 0
		for id, b := range tb {
			if !strings.HasPrefix(id, c.name+"-") {
				continue // the usage probe
			}
			n++
			if vb[id] != b {
				t.Fatalf("%s: request %s differs:\nvirtual %.300s\ntext    %.300s", c.name, id, vb[id], b)
			}
		}
		if n != len(turns) {
			t.Fatalf("%s: %d bodies of %d turns", c.name, n, len(turns))
		}
	}
}

// A trace naming a prompt generator this build does not know is refused
// before anything is sent.
func TestUnknownPromptGeneratorRefused(t *testing.T) {
	c := conv("u", 1, 0, 0, 5)
	c[0].Messages = []trace.Message{{Role: "user", Tokens: 10, Virtual: true}}
	src := NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base", Prompts: &trace.PromptGenerator{Name: "other", Tokenizer: "o200k_base", BlockSize: 16}}, c)
	if _, err := New(Config{Targets: []string{"http://127.0.0.1:1"}}, src); err == nil {
		t.Fatal("a trace with an unknown prompt generator was accepted")
	}
}

// A shard's prefetch stage makes the text of its own conversations only:
// over the shards of one trace, each virtual message is made once, by the
// shard that sends it, and every shard sends what it owns.
func TestPrefetchSkipsOtherShards(t *testing.T) {
	srv := mocktest.Start(t, nil)
	const shards, n = 3, 60
	var turns []trace.Turn
	own := make([]int64, shards)
	for i := range n {
		c := conv(fmt.Sprintf("v%03d", i), 2, 0, 0, 2)
		for k := range c {
			c[k].Messages = []trace.Message{{Role: "user", Tokens: 20, Virtual: true, BlockSeed: int64(i*10 + k)}}
		}
		own[hash(c[0].ConversationID)%shards] += int64(len(c))
		turns = append(turns, c...)
	}
	meta := trace.TraceMeta{Tokenizer: "o200k_base", Prompts: &trace.PromptGenerator{Name: trace.PromptGeneratorBlocks, Tokenizer: "o200k_base", BlockSize: 16}}
	for shard := range shards {
		r, err := New(Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Shard: shard, Shards: shards}, NewMemorySource(meta, turns))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := r.Run(ctx, &memSink{})
		cancel()
		made := r.mat.made.Load()
		r.Close()
		if err != nil || res.Errors != 0 || res.Sent != own[shard] {
			t.Fatalf("shard %d: result %+v, %v; it owns %d turns", shard, res, err, own[shard])
		}
		if own[shard] == 0 || made != own[shard] {
			t.Errorf("shard %d/%d: %d messages materialized, it owns %d", shard, shards, made, own[shard])
		}
	}
}

// The prefetch stage runs ahead of its reader as far as its text budget
// allows and no further: with room for everything it makes the whole
// source before the first Next; with room for 3 conversations' text it
// holds 3 and reads on only as Next takes them, and hands them over in the
// source's order.
func TestPrefetchBudget(t *testing.T) {
	meta := trace.TraceMeta{Tokenizer: "o200k_base", Prompts: &trace.PromptGenerator{Name: trace.PromptGeneratorBlocks, Tokenizer: "o200k_base", BlockSize: 16}}
	var turns []trace.Turn
	for i := range 40 {
		c := conv(fmt.Sprintf("b%02d", i), 1, 0, 0, 2)
		c[0].Messages = []trace.Message{{Role: "user", Tokens: 100, Virtual: true, BlockSeed: int64(i)}}
		turns = append(turns, c...)
	}
	mat, err := newMaterializer(meta, false)
	if err != nil {
		t.Fatal(err)
	}
	_, one, _ := mat.fill(turns[:1], false, nil)
	state := func(p *prefetch) (queued int, ended bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.q), p.ended
	}
	waitFor := func(p *prefetch, ok func(queued int, ended bool) bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if ok(state(p)) {
				return
			}
			if time.Now().After(deadline) {
				q, e := state(p)
				t.Fatalf("prefetch stuck: %d queued, ended %v", q, e)
			}
		}
	}
	all := func(_ []trace.Turn) bool { return true }

	big := newPrefetch(NewMemorySource(meta, turns), mat, all, prefetchConvs, prefetchBytes, nil)
	waitFor(big, func(q int, ended bool) bool { return ended })
	if q, _ := state(big); q != 40 {
		t.Errorf("a large budget holds %d of 40 conversations before the first Next", q)
	}
	big.stop()

	src := &countedSource{Source: NewMemorySource(meta, turns)}
	small := newPrefetch(src, mat, all, prefetchConvs, 3*one+one/2, nil)
	defer small.stop()
	for i := range 40 {
		if i < 37 {
			waitFor(small, func(q int, _ bool) bool { return q == 3 })
			time.Sleep(2 * time.Millisecond) // room to overrun, if it would
			if q, _ := state(small); q != 3 {
				t.Fatalf("after %d taken: %d queued, budget 3", i, q)
			}
			if reads := int(src.n.Load()); reads > i+4 {
				t.Fatalf("after %d taken: %d source reads, want at most %d", i, reads, i+4)
			}
		}
		c, err := small.Next()
		if err != nil || c[0].ConversationID != fmt.Sprintf("b%02d", i) || c[0].Messages[0].Content == "" {
			t.Fatalf("Next %d: %v %v", i, c, err)
		}
	}
	if _, err := small.Next(); err != io.EOF {
		t.Fatalf("after the last: %v, want EOF", err)
	}
}

// countedSource counts its Next calls.
type countedSource struct {
	Source
	n atomic.Int64
}

func (s *countedSource) Next() ([]trace.Turn, error) { s.n.Add(1); return s.Source.Next() }

// The text of a trace whose virtual prompts fit the prefetch budget is
// all made before the run's clock starts: none is made while requests are
// dispatched.
func TestPrefetchDoneBeforeClock(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var turns []trace.Turn
	const n = 3 * primeRows // more than prime reads before the clock
	for i := range n {
		c := conv(fmt.Sprintf("p%03d", i), 1, time.Duration(i)*time.Millisecond, 0, 2)
		c[0].Messages = []trace.Message{{Role: "user", Tokens: 2000, Virtual: true, BlockSeed: int64(i)}}
		turns = append(turns, c...)
	}
	meta := trace.TraceMeta{Tokenizer: "o200k_base", Prompts: &trace.PromptGenerator{Name: trace.PromptGeneratorBlocks, Tokenizer: "o200k_base", BlockSize: 16}}
	r, err := New(Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Timing: TimingTrace, MaxConcurrency: 32}, NewMemorySource(meta, turns))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil || res.Sent != n || res.Errors != 0 {
		for _, rec := range sink.Records() {
			if rec.ErrorKind != trace.ErrNone {
				t.Logf("%s: %s %s", rec.RequestID, rec.ErrorKind, rec.ErrorMessage)
				break
			}
		}
		t.Fatalf("%d sent, %d errors, %v", res.Sent, res.Errors, err)
	}
	if made := r.mat.made.Load(); made != n {
		t.Fatalf("%d prompts made, want %d", made, n)
	}
	if last, start := r.mat.lastNs.Load(), sink.RunMeta().StartMonoNs; last >= start {
		t.Errorf("the last prompt was made %v after the clock started", time.Duration(last-start))
	}
}

// What the conversations read ahead of their dispatch hold is bounded by
// bytes of contents: before the clock starts, prime's conversations and the
// look-ahead's queue hold their budgets (one conversation over each at
// most), not a batch of rows whose media were all made.
func TestReadAheadHoldsItsBudget(t *testing.T) {
	srv := mocktest.Start(t, nil)
	const convs = 40
	var turns []trace.Turn
	for i := range convs {
		c := conv(fmt.Sprintf("w%02d", i), 1, time.Duration(i)*time.Millisecond, 0, 2)
		c[0].Messages[1].Media = []trace.Media{{Kind: trace.MediaAudio, Format: "wav", DurationMs: 3000, Seed: int64(i)}}
		turns = append(turns, c...)
	}
	b, err := media.Make(nil, &turns[0].Messages[1].Media[0])
	if err != nil {
		t.Fatal(err)
	}
	one := len(b) + base64.StdEncoding.EncodedLen(len(b)) // a conversation's media and their base64
	r, err := New(Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Timing: TimingTrace}, NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.ahead = aheadBudget{prime: 2 * one, prefetch: 3 * one}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := int64(-1) // items made when the clock started (the first SetRunMeta)
	sink := &startSink{memSink: &memSink{}, started: func() { before = r.mat.items.Load() }}
	res, err := r.Run(ctx, sink)
	if err != nil || res.Sent != convs || res.Errors != 0 {
		t.Fatalf("%d sent, %d errors, %v", res.Sent, res.Errors, err)
	}
	// prime holds 2 (its second reaches its budget), the queue 3 and the
	// look-ahead 1 more, made and waiting for room.
	if before < 2 || before > 6 {
		t.Errorf("%d of %d conversations' media made before the clock started, want 2 to 6 (budgets of 2 and 3 conversations)", before, convs)
	}
	if made := r.mat.items.Load(); made != convs {
		t.Errorf("%d items made in all, want %d", made, convs)
	}
}

// startSink calls started when the run's clock has started (its first
// SetRunMeta).
type startSink struct {
	*memSink
	once    sync.Once
	started func()
}

func (s *startSink) SetRunMeta(m trace.RunMeta) {
	s.once.Do(s.started)
	s.memSink.SetRunMeta(m)
}

// The media of a trace are made by the look-ahead before the run's clock
// starts, all of them, never while requests are dispatched; each record
// counts the items its body carried (history included) and their bytes,
// and when the write of the body began.
func TestMediaMadeBeforeClock(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var turns []trace.Turn
	const convs = 20
	for i := range convs {
		c := conv(fmt.Sprintf("m%03d", i), 2, time.Duration(i)*time.Millisecond, 0, 2)
		for k := range c {
			c[k].Messages[len(c[k].Messages)-1].Media = []trace.Media{
				{Kind: trace.MediaImage, Format: "png", Width: 64, Height: 32, Seed: int64(10*i + k)},
				{Kind: trace.MediaAudio, Format: "wav", DurationMs: 20, Seed: int64(10*i + k)},
			}
		}
		turns = append(turns, c...)
	}
	r, err := New(Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Timing: TimingTrace}, NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil || res.Sent != 2*convs {
		t.Fatalf("%d sent, %v", res.Sent, err)
	}
	if made := r.mat.items.Load(); made != 4*convs {
		t.Fatalf("%d media items made, want %d", made, 4*convs)
	}
	if last, start := r.mat.lastNs.Load(), sink.RunMeta().StartMonoNs; last >= start {
		t.Errorf("the last item was made %v after the clock started", time.Duration(last-start))
	}
	sizes := map[string]int64{} // conversation/turn: media bytes of the turn
	for _, tu := range turns {
		for _, it := range tu.Messages[len(tu.Messages)-1].Media {
			b, err := media.Make(nil, &it)
			if err != nil {
				t.Fatal(err)
			}
			sizes[fmt.Sprint(tu.ConversationID, tu.Turn)] += int64(len(b))
		}
	}
	for _, rec := range sink.Records() {
		want, items := sizes[fmt.Sprint(rec.ConversationID, rec.Turn)], int32(2)
		if rec.Turn > 0 { // turn 0's media again in the history
			want, items = want+sizes[fmt.Sprint(rec.ConversationID, rec.Turn-1)], 4
		}
		if rec.ErrorKind != trace.ErrNone {
			t.Errorf("%s: %s %s", rec.RequestID, rec.ErrorKind, rec.ErrorMessage)
		}
		if rec.MediaItems != items || rec.MediaBytes != want || rec.RequestBytes <= want {
			t.Errorf("%s: %d items of %d bytes in %d, want %d of %d", rec.RequestID, rec.MediaItems, rec.MediaBytes, rec.RequestBytes, items, want)
		}
		if rec.WriteStartNs <= 0 || rec.WriteStartNs > rec.SentNs {
			t.Errorf("%s: write start %d, sent %d", rec.RequestID, rec.WriteStartNs, rec.SentNs)
		}
	}
}

// The look-ahead encodes an item's base64 with its bytes when its request
// carries it so, and not for a speech upload, which sends the bytes.
func TestMediaBase64MadeAhead(t *testing.T) {
	m, err := newMaterializer(trace.TraceMeta{Tokenizer: "o200k_base"}, true)
	if err != nil {
		t.Fatal(err)
	}
	img := trace.Media{Kind: trace.MediaImage, Format: "png", Width: 16, Height: 8, Seed: 3}
	clip := trace.Media{Kind: trace.MediaAudio, Format: "wav", DurationMs: 20, Seed: 4}
	conv := []trace.Turn{
		{ConversationID: "a", Endpoint: trace.EndpointChat, Messages: []trace.Message{{Role: "user", Content: "x", Media: []trace.Media{img}}}},
		{ConversationID: "a", Turn: 1, Endpoint: trace.EndpointTranscriptions, Messages: []trace.Message{{Role: "user", Media: []trace.Media{clip}}}},
	}
	got, n, err := m.fill(conv, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	chat, speech := got[0].Messages[0].Media[0], got[1].Messages[0].Media[0]
	if chat.Data == "" || chat.Base64 != base64.StdEncoding.EncodeToString([]byte(chat.Data)) {
		t.Errorf("chat item: %d bytes, base64 %q...", len(chat.Data), chat.Base64[:min(16, len(chat.Base64))])
	}
	if speech.Data == "" || speech.Base64 != "" {
		t.Errorf("speech upload: %d bytes, base64 of %d", len(speech.Data), len(speech.Base64))
	}
	if want := len(chat.Data) + len(chat.Base64) + len(speech.Data); n != want {
		t.Errorf("fill counted %d bytes, want %d (the base64 is held too)", n, want)
	}
	if conv[0].Messages[0].Media[0].Base64 != "" {
		t.Error("fill changed its caller's turns")
	}
}

// A run whose clock can tell its next due instant gives its look-ahead a
// pause (mediaGate), and fill passes it to the media workers: they call it
// before an item, between the steps of making it and before its base64.
// Without such a clock, or without media, there is none.
func TestMediaWorkersPause(t *testing.T) {
	m, err := newMaterializer(trace.TraceMeta{Tokenizer: "o200k_base"}, true)
	if err != nil {
		t.Fatal(err)
	}
	src := NewMemorySource(trace.TraceMeta{}, nil)
	all := func([]trace.Turn) bool { return true }
	with := newPrefetch(src, m, all, prefetchConvs, prefetchBytes, &dueSeq{})
	defer with.stop()
	without := newPrefetch(src, m, all, prefetchConvs, prefetchBytes, nil)
	defer without.stop()
	text := newPrefetch(src, &materializer{}, all, prefetchConvs, prefetchBytes, &dueSeq{})
	defer text.stop()
	if with.pause == nil || without.pause != nil || text.pause != nil {
		t.Fatalf("pause set: with a due clock %v, without %v, for a trace without media %v; want true, false, false",
			with.pause != nil, without.pause != nil, text.pause != nil)
	}

	img := trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 512, Height: 512, Seed: 3}
	conv := []trace.Turn{{ConversationID: "a", Endpoint: trace.EndpointChat, Messages: []trace.Message{{Role: "user", Content: "x", Media: []trace.Media{img}}}}}
	pauses := 0
	got, _, err := m.fill(conv, false, func() { pauses++ })
	if err != nil {
		t.Fatal(err)
	}
	want, err := media.Make(nil, &img)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Messages[0].Media[0].Data != string(want) {
		t.Fatal("the item made with pauses differs from media.Make's")
	}
	// 4 steps of pixels (64 Ki each), a write per 4 KiB of JPEG, and the
	// two around the item.
	if lo := 4 + len(want)/4096 + 2; pauses < lo {
		t.Errorf("%d pauses making a %d-byte JPEG, want at least %d", pauses, len(want), lo)
	}
}

// Making media leaves little garbage beyond what the items keep (their
// bytes and base64): the pixels and the encoded bytes are made in reused
// buffers, so a run whose look-ahead makes images as requests go out
// collects rarely. Every item still holds its own bytes.
func TestMediaMakingLeavesLittleGarbage(t *testing.T) {
	m, err := newMaterializer(trace.TraceMeta{Tokenizer: "o200k_base"}, true)
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(0)
	convs := func(n int) [][]trace.Turn {
		var cs [][]trace.Turn
		for i := range n {
			var items []trace.Media
			for range 2 {
				seed++
				items = append(items, trace.Media{Kind: trace.MediaImage, Format: "jpeg", Width: 512, Height: 512, Seed: seed})
			}
			cs = append(cs, []trace.Turn{{ConversationID: fmt.Sprint("c", i), Endpoint: trace.EndpointChat,
				Messages: []trace.Message{{Role: "user", Content: "x", Media: items}}}})
		}
		return cs
	}
	for _, c := range convs(2) { // the buffers' first use
		if _, _, err := m.fill(c, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	todo := convs(8)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var made [][]trace.Turn
	kept := 0
	for _, c := range todo {
		got, n, err := m.fill(c, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, got)
		kept += n
	}
	runtime.ReadMemStats(&after)
	if alloc := int(after.TotalAlloc - before.TotalAlloc); alloc > 5*kept/2 && !raceOn {
		t.Errorf("making 16 images of 512x512 allocated %d bytes for the %d they keep, want at most 2.5 times as many", alloc, kept)
	}
	for _, c := range made {
		for _, it := range c[0].Messages[0].Media {
			want, err := media.Make(nil, &it)
			if err != nil {
				t.Fatal(err)
			}
			if it.Data != string(want) || it.Base64 != base64.StdEncoding.EncodeToString(want) {
				t.Fatalf("item of seed %d holds %d bytes that are not its own (%d)", it.Seed, len(it.Data), len(want))
			}
		}
	}
}

// A conversation whose first turn carries media is launched earlier, by
// its bytes, so that its body of megabytes is built before its instant;
// text alone keeps the short lead, and no lead passes maxLead.
func TestLaunchLeadGrowsWithMedia(t *testing.T) {
	withMedia := func(n int) []trace.Turn {
		return []trace.Turn{{Messages: []trace.Message{{Role: "user", Content: "look",
			Media: []trace.Media{{Kind: trace.MediaImage, Data: strings.Repeat("x", n)}}}}}}
	}
	text := []trace.Turn{{Messages: []trace.Message{{Role: "user", Content: "hi"}}}}
	if got := launchLead(text); got != lookahead {
		t.Errorf("text: lead %v, want %v", time.Duration(got), time.Duration(lookahead))
	}
	if got, want := launchLead(withMedia(1<<20)), lookahead+leadPerMediaByte<<20; got != want {
		t.Errorf("1 MiB of media: lead %v, want %v", time.Duration(got), time.Duration(want))
	}
	if got := launchLead(withMedia(64 << 20)); got != maxLead {
		t.Errorf("64 MiB of media: lead %v, want the cap %v", time.Duration(got), time.Duration(maxLead))
	}
}

// The run's clock starts far enough ahead that a conversation with media
// at offset 0 is launched its whole lead before its start, as later ones
// are: its body of megabytes is built before its instant rather than
// after it.
func TestClockStartsALeadAhead(t *testing.T) {
	srv := mocktest.Start(t, nil)
	img := trace.Media{Kind: trace.MediaImage, Format: "png", Width: 256, Height: 256, Seed: 7}
	data, err := media.Make(nil, &img)
	if err != nil {
		t.Fatal(err)
	}
	withImage := conv("img", 1, 0, 0, 2)
	withImage[0].Messages[len(withImage[0].Messages)-1].Media = []trace.Media{img}
	for _, tc := range []struct {
		name  string
		turns []trace.Turn
		lead  int64
	}{
		{"image", withImage, lookahead + leadPerMediaByte*int64(len(data))},
		{"text, then an image", append(conv("txt", 1, 0, 0, 2), withImage...), lookahead + leadPerMediaByte*int64(len(data))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Timing: TimingTrace}, NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, tc.turns))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.Prepare(ctx); err != nil { // the probe and the ready check: before the time taken
				t.Fatal(err)
			}
			sink := &memSink{}
			before := clock.Mono()
			res, err := r.Run(ctx, sink)
			if err != nil || res.Errors != 0 {
				t.Fatalf("%+v, %v", res, err)
			}
			if ahead := sink.RunMeta().StartMonoNs - before; ahead < tc.lead {
				t.Errorf("the clock started %v after Run was called, want at least the lead %v", time.Duration(ahead), time.Duration(tc.lead))
			}
			for _, rec := range sink.Records() {
				if rec.SlotNs < rec.IntendedNs || rec.IntendedNs < 0 {
					t.Errorf("%s: slot %d before its instant %d", rec.RequestID, rec.SlotNs, rec.IntendedNs)
				}
			}
		})
	}
}

// procsSink notes GOMAXPROCS as each record comes in, during the run.
type procsSink struct {
	memSink
	mu    sync.Mutex
	procs []int
}

func (s *procsSink) Submit(rec *trace.Record) {
	s.mu.Lock()
	s.procs = append(s.procs, runtime.GOMAXPROCS(0))
	s.mu.Unlock()
	s.memSink.Submit(rec)
}

// A run with media adds a P for each goroutine that holds its own while
// it waits or grinds (the media workers, and the kernel stamps' poller),
// so that they do not take the dispatcher's, and one kept idle for the
// network poller, and gives them back when it ends; without media it adds
// none.
func TestRunReservesPsForTheirHolders(t *testing.T) {
	srv := mocktest.Start(t, nil)
	img := conv("img", 1, 0, 0, 2)
	img[0].Messages[len(img[0].Messages)-1].Media = []trace.Media{{Kind: trace.MediaImage, Format: "png", Width: 64, Height: 64, Seed: 3}}
	base := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name, stamp string
		turns       []trace.Turn
		want        int
	}{
		{"text, goroutine stamps", trace.StampGoroutine, conv("txt", 2, 0, 0, 2), base},
		{"text, kernel stamps", trace.StampKernel, conv("txt", 2, 0, 0, 2), base}, // the poller's P is the monitor's to take back
		{"images, goroutine stamps", trace.StampGoroutine, img, base + max(1, base-1) + spareP},
		{"images, kernel stamps", trace.StampKernel, img, base + max(1, base-1) + 1 + spareP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Timing: TimingTrace, StampMode: tc.stamp}, NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, tc.turns))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if tc.stamp != trace.StampGoroutine && r.conns.stamp.Mode() == trace.StampGoroutine {
				t.Skip("no kernel stamps here")
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sink := &procsSink{}
			if res, err := r.Run(ctx, sink); err != nil || res.Errors != 0 {
				t.Fatalf("%+v, %v", res, err)
			}
			if len(sink.procs) == 0 {
				t.Fatal("no records")
			}
			for _, n := range sink.procs {
				if n != tc.want {
					t.Errorf("GOMAXPROCS %d during the run, want %d (%d before it)", n, tc.want, base)
				}
			}
			if n := runtime.GOMAXPROCS(0); n != base {
				t.Errorf("GOMAXPROCS %d after the run, want %d back", n, base)
			}
		})
	}
}
