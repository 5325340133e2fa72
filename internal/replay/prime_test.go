package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// stampedSource records, for every Next call of the source under it, the
// monotonic instant the call returned and what it returned.
type stampedSource struct {
	Source
	calls     []stampedNext
	failAfter int // > 0: Next fails after this many conversations
}

type stampedNext struct {
	at    int64 // clock.Mono() when Next returned
	id    string
	start int64 // the conversation's start offset
	rows  int
	err   error
}

func (s *stampedSource) Next() ([]trace.Turn, error) {
	var c []trace.Turn
	var err error
	if s.failAfter > 0 && len(s.calls) == s.failAfter {
		err = errors.New("the disk went away")
	} else {
		c, err = s.Source.Next()
	}
	e := stampedNext{at: clock.Mono(), err: err}
	if err == nil {
		e.id, e.start, e.rows = c[0].ConversationID, c[0].StartOffsetNs, len(c)
	}
	s.calls = append(s.calls, e)
	return c, err
}

// runSource replays src under cfg into a memSink with a bounded context
// and returns Run's result and error.
func runSource(t *testing.T, cfg Config, src Source) (*memSink, *Result, error) {
	t.Helper()
	r, err := New(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	return sink, res, err
}

// The run reads its source's first batch before its clock starts: every
// read that returned one of the first primeRows turns (among them every
// conversation at offset 0) returned before the start, so those
// conversations' lateness is the dispatcher's alone; the rest of the file
// is read after, as the schedule goes (the source is not read whole). A
// redacted message of a primed turn is sent with the same filler text as
// ever, and the caller's turns are not written to.
func TestFirstBatchReadBeforeClock(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var turns []trace.Turn
	for i := range 4 {
		turns = append(turns, conv(fmt.Sprintf("a%d", i), 1, 0, 0, 2)...)
	}
	turns[0].Messages[1].Content = "" // redacted: 10 tokens
	for i := range 300 {
		turns = append(turns, conv(fmt.Sprintf("b%03d", i), 1, 30*time.Millisecond+time.Duration(i)*200*time.Microsecond, 0, 2)...)
	}
	src := &stampedSource{Source: NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns)}
	sink, res, err := runSource(t, Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Seed: 3}, src)
	if err != nil || res.Sent != int64(len(turns)) || res.Errors != 0 {
		t.Fatalf("result %+v, %v", res, err)
	}
	start := sink.RunMeta().StartMonoNs
	rows, after := 0, 0
	for i, c := range src.calls {
		switch {
		case rows < primeRows && c.at >= start:
			t.Errorf("read %d (%s, after %d turns) returned %v after the clock started", i, c.id, rows, time.Duration(c.at-start))
		case rows >= primeRows && c.at < start:
			t.Errorf("read %d (%s, after %d turns) was made before the clock: more than the first batch was held", i, c.id, rows)
		case c.at >= start:
			after++
			if c.err == nil && c.start == 0 {
				t.Errorf("conversation %s at offset 0 was read after the clock started", c.id)
			}
		}
		rows += c.rows
	}
	if after == 0 || rows != len(turns) {
		t.Errorf("%d reads after the clock, %d turns read of %d", after, rows, len(turns))
	}
	recs := sink.byID()
	for i := range 4 {
		rec := recs[fmt.Sprintf("a%d-0-0", i)]
		if rec.IntendedNs != 0 || rec.SlotNs < rec.IntendedNs || rec.ErrorKind != "" {
			t.Errorf("a%d: intended %d slot %d error %q", i, rec.IntendedNs, rec.SlotNs, rec.ErrorKind)
		}
	}
	want := fillerText(10, 3, "a0/0/1")
	found := false
	for _, e := range srv.Log() {
		if e.RequestID == "a0-0-0" {
			found = bytes.Contains(e.Body, []byte(`"content":"`+want+`"`))
		}
	}
	if !found {
		t.Errorf("the redacted message of a0 was not sent as its filler text %q", want)
	}
	if turns[0].Messages[1].Content != "" {
		t.Errorf("the caller's turn was written to: %q", turns[0].Messages[1].Content)
	}
}

// A shard skips the other shards' conversations before its clock too:
// with a start barrier, a trace whose own share fits in one batch is read
// to its end before the barrier's instant, and the shard replays exactly
// its own conversations.
func TestShardPrimesBeforeBarrier(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var convs [][]trace.Turn
	own := map[string]bool{}
	for i := range 300 {
		c := conv(fmt.Sprintf("c%03d", i), 1, 0, 0, 2)
		if hash(c[0].ConversationID)%3 == 1 {
			own[c[0].ConversationID] = true
		}
		convs = append(convs, c)
	}
	f, err := OpenFile(writeTrace(t, convs...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src := &stampedSource{Source: f}
	r, err := New(Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Shard: 1, Shards: 3}, src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.cfg.StartAt = time.Now().Add(500 * time.Millisecond) // once prepared, so a slow start-up cannot make it pass
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil || res.Sent != int64(len(own)) || res.Errors != 0 {
		t.Fatalf("result %+v, %v; the shard owns %d conversations", res, err, len(own))
	}
	barrier := sink.RunMeta().StartMonoNs
	last := src.calls[len(src.calls)-1]
	if len(src.calls) != 301 || !errors.Is(last.err, io.EOF) {
		t.Fatalf("%d reads, the last %v; want 300 conversations and the end", len(src.calls), last.err)
	}
	for _, c := range src.calls {
		if c.at >= barrier {
			t.Errorf("read of %s returned %v after the start instant", c.id, time.Duration(c.at-barrier))
		}
	}
	for _, rec := range sink.Records() {
		if !own[rec.ConversationID] || rec.IntendedNs != 0 || rec.SlotNs < 0 {
			t.Errorf("%s: own %v intended %d slot %d", rec.RequestID, own[rec.ConversationID], rec.IntendedNs, rec.SlotNs)
		}
	}
}

// A read error met while priming is the run's error after the
// conversations read before it were replayed, as it was when the first
// read came after the clock.
func TestPrimeReadError(t *testing.T) {
	srv := mocktest.Start(t, nil)
	turns := append(conv("a", 1, 0, 0, 2), conv("b", 1, 0, 0, 2)...)
	turns = append(turns, conv("c", 1, 0, 0, 2)...)
	src := &stampedSource{Source: NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns), failAfter: 2}
	sink, res, err := runSource(t, Config{Targets: []string{srv.URL()}, IgnoreEOS: true}, src)
	if err == nil || err.Error() != "the disk went away" || res == nil || res.Sent != 2 {
		t.Fatalf("result %+v, %v; want 2 sent and the read error", res, err)
	}
	if recs := sink.byID(); len(recs) != 2 || recs["a-0-0"].RequestID == "" || recs["b-0-0"].RequestID == "" {
		t.Errorf("records %v", recs)
	}
}

// A shard that owns nothing of a trace's first thousands of rows stops
// skipping them before its clock after 4 batches a shard, and reads its
// own conversations on the schedule.
func TestPrimeSkipsBounded(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var turns []trace.Turn
	other := 0
	for i := 0; other < 2*4*primeRows+10; i++ {
		id := fmt.Sprintf("o%05d", i)
		if hash(id)%2 == 0 {
			turns = append(turns, conv(id, 1, 0, 0, 2)...)
			other++
		}
	}
	var own []string
	for i := 0; len(own) < 2; i++ {
		id := fmt.Sprintf("m%05d", i)
		if hash(id)%2 == 1 {
			turns = append(turns, conv(id, 1, 20*time.Millisecond, 0, 2)...)
			own = append(own, id)
		}
	}
	src := &stampedSource{Source: NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns)}
	sink, res, err := runSource(t, Config{Targets: []string{srv.URL()}, IgnoreEOS: true, Shard: 1, Shards: 2}, src)
	if err != nil || res.Sent != 2 {
		t.Fatalf("result %+v, %v; want the shard's 2 conversations", res, err)
	}
	start := sink.RunMeta().StartMonoNs
	before := 0
	for _, c := range src.calls {
		if c.at < start {
			before++
		}
	}
	if before != 2*4*primeRows {
		t.Errorf("%d reads before the clock, want the skip bound %d", before, 2*4*primeRows)
	}
}
