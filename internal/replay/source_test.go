package replay

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// drain returns the conversation ids and turn counts a source yields.
func drain(t *testing.T, src Source) (ids []string, turns []int) {
	t.Helper()
	for {
		c, err := src.Next()
		if errors.Is(err, io.EOF) {
			return ids, turns
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, tu := range c {
			if tu.ConversationID != c[0].ConversationID {
				t.Fatalf("conversation %s mixed with %s", c[0].ConversationID, tu.ConversationID)
			}
		}
		ids, turns = append(ids, c[0].ConversationID), append(turns, len(c))
	}
}

// A trace file and the same turns in memory yield the same conversations,
// in start order, each whole, even where a conversation spans two of the
// file source's read batches.
func TestSourcesYieldConversations(t *testing.T) {
	var convs [][]trace.Turn
	var all []trace.Turn
	for i, n := range []int{1, 3, sourceBatch - 3, 7, sourceBatch + 5, 2} {
		c := conv(string(rune('a'+i)), n, 0, 0, 1)
		for k := range c {
			c[k].StartOffsetNs = int64(i)
		}
		convs = append(convs, c)
		all = append(all, c...)
	}
	f, err := OpenFile(writeTrace(t, convs...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Len() != int64(len(all)) || f.Meta().Tokenizer != "o200k_base" {
		t.Fatalf("file source: Len %d (want %d), meta %+v", f.Len(), len(all), f.Meta())
	}
	fileIDs, fileTurns := drain(t, f)
	mem := NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, all)
	memIDs, memTurns := drain(t, mem)
	wantIDs, wantTurns := []string{"a", "b", "c", "d", "e", "f"}, []int{1, 3, sourceBatch - 3, 7, sourceBatch + 5, 2}
	if !slices.Equal(fileIDs, wantIDs) || !slices.Equal(fileTurns, wantTurns) {
		t.Errorf("file source yielded %v %v, want %v %v", fileIDs, fileTurns, wantIDs, wantTurns)
	}
	if !slices.Equal(memIDs, wantIDs) || !slices.Equal(memTurns, wantTurns) || mem.Len() != int64(len(all)) {
		t.Errorf("memory source yielded %v %v (Len %d), want %v %v", memIDs, memTurns, mem.Len(), wantIDs, wantTurns)
	}
	if _, err := f.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the end: %v, want io.EOF", err)
	}
}

// Record replays an in-memory source (no trace file) into a sink it opens
// only once the targets passed Prepare; a target that refuses the probe is
// a PrepareError and nothing is opened, a bad config a ConfigError.
func TestRecordFromMemory(t *testing.T) {
	srv := mocktest.Start(t, nil)
	turns := append(conv("a", 2, 0, 0, 3), conv("b", 2, 0, 0, 3)...)
	sink := &record.Memory{}
	var opened *Runner
	res, err := Record(t.Context(), Config{Targets: []string{srv.URL()}}, NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns),
		func(r *Runner) (record.Sink, error) { opened = r; return sink, nil })
	if err != nil || res.Sent != 4 || res.Errors != 0 || len(sink.Records()) != 4 {
		t.Fatalf("Record: %v %+v, %d records", err, res, len(sink.Records()))
	}
	if opened == nil || opened.Stats().Done != 4 || sink.RunMeta().Config["trace"] != "" {
		t.Errorf("open got %v; run meta %v", opened, sink.RunMeta().Config)
	}

	refusing := startHostile(t, &hostileServer{respond: jsonAnswer, respondProbes: true})
	calls := 0
	_, err = Record(t.Context(), Config{Targets: []string{refusing.url()}, Model: "m"}, NewMemorySource(trace.TraceMeta{}, turns),
		func(*Runner) (record.Sink, error) { calls++; return sink, nil })
	var pe *PrepareError
	if !errors.As(err, &pe) || calls != 0 {
		t.Errorf("a target refusing the probe: %v (open called %d times), want a PrepareError and no open", err, calls)
	}
	if ids, _ := refusing.requests(); len(ids) != 0 {
		t.Errorf("traffic sent although the probe failed: %v", ids)
	}
	_, err = Record(t.Context(), Config{Targets: []string{"ftp://x"}}, NewMemorySource(trace.TraceMeta{}, turns), Into(sink))
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("a bad target: %v, want a ConfigError", err)
	}
}
