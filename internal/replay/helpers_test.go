package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// memSink is record.Memory with lookups for tests.
type memSink struct{ record.Memory }

// byID returns the records keyed by request id.
func (s *memSink) byID() map[string]trace.Record {
	recs := s.Records()
	m := make(map[string]trace.Record, len(recs))
	for _, r := range recs {
		m[r.RequestID] = r
	}
	return m
}

// conv builds a conversation of n turns starting at start, each turn asking
// for out tokens, with the given think time and reference answers.
func conv(id string, n int, start, think time.Duration, out int32) []trace.Turn {
	turns := make([]trace.Turn, n)
	for k := range turns {
		msgs := []trace.Message{{Role: "user", Content: fmt.Sprintf("question %d of %s, please answer briefly", k, id), Tokens: 10}}
		if k == 0 {
			msgs = append([]trace.Message{{Role: "system", Content: "You are terse.", Tokens: 4}}, msgs...)
		}
		turns[k] = trace.Turn{
			ConversationID: id, Turn: int32(k),
			StartOffsetNs:   int64(start),
			ArrivalOffsetNs: int64(start) + int64(k)*int64(think+20*time.Millisecond),
			ThinkTimeNs:     int64(think),
			Messages:        msgs,
			ReferenceAnswer: fmt.Sprintf("reference answer %d of %s", k, id),
			InputTokens:     int32(len(msgs) * 7),
			OutputTokens:    out,
		}
	}
	return turns
}

// writeTrace writes convs, sorted as the format requires, to a temp file.
func writeTrace(t testing.TB, convs ...[]trace.Turn) string {
	t.Helper()
	sort.SliceStable(convs, func(i, j int) bool {
		if convs[i][0].StartOffsetNs != convs[j][0].StartOffsetNs {
			return convs[i][0].StartOffsetNs < convs[j][0].StartOffsetNs
		}
		return convs[i][0].ConversationID < convs[j][0].ConversationID
	})
	path := filepath.Join(t.TempDir(), "trace.parquet")
	w, err := trace.NewTraceWriter(path, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		if err := w.Write(c...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// run replays cfg into a memSink with a bounded context.
func run(t testing.TB, cfg Config) (*memSink, *Result) {
	t.Helper()
	r, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil {
		t.Fatal(err)
	}
	return sink, res
}
