package replay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// longConversations builds n conversations of 30-40 turns whose history
// grows to 30-80 KB, all starting within 100 ms: vLLM's multi-turn
// benchmark deadlocks on this shape.
func longConversations(n int, seed uint64) [][]trace.Turn {
	rng := rand.New(rand.NewPCG(seed, 1))
	var convs [][]trace.Turn
	for i := range n {
		turns := 30 + rng.IntN(11)
		total := (30 + rng.IntN(51)) << 10 // bytes of history at the end
		per := total / turns
		id := fmt.Sprintf("d%03d", i)
		c := conv(id, turns, time.Duration(rng.IntN(100))*time.Millisecond, 0, 4)
		for k := range c {
			last := &c[k].Messages[len(c[k].Messages)-1]
			last.Content = strings.Repeat(fmt.Sprintf("%s turn %d words ", id, k), per/10+1)[:per]
			last.Tokens = int32(per / 4)
		}
		convs = append(convs, c)
	}
	return convs
}

// TestLongConversationsNoDeadlock replays the deadlock shape, scaled for
// CI, at a concurrency far below and above the number of conversations:
// every request must complete, without error, in bounded time.
func TestLongConversationsNoDeadlock(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	path := writeTrace(t, longConversations(30, 7)...)
	for _, conc := range []int{2, 100} {
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			srv := mocktest.Start(t, func(c *mock.Config) {
				c.Latency.PrefillBase = mock.Duration(100 * time.Microsecond)
				c.Latency.DecodeBase = mock.Duration(200 * time.Microsecond)
				c.KeepBodies = false
			})
			r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, MaxConcurrency: conc, IgnoreEOS: true, IdleTimeout: 10 * time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			// A hang guard, not a budget: under -race on a loaded 2-core
			// machine the 1,060 requests take about a minute.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			sink := &memSink{}
			began := time.Now()
			res, err := r.Run(ctx, sink)
			if err != nil {
				t.Fatal(err)
			}
			if res.Canceled != "" {
				t.Fatalf("not finished in bounded time: %s after %v, %d sent", res.Canceled, time.Since(began), res.Sent)
			}
			recs := sink.byID()
			if int64(len(recs)) != r.src.Len() || res.Errors != 0 {
				t.Fatalf("%d records of %d, %d errors", len(recs), r.src.Len(), res.Errors)
			}
			var maxPrompt int32
			for _, rec := range recs {
				maxPrompt = max(maxPrompt, rec.PromptTokens)
			}
			if maxPrompt < 7000 { // 30 KB of history is ~7,500 mock tokens
				t.Errorf("largest prompt %d tokens: the history was not carried", maxPrompt)
			}
			t.Logf("%d requests in %v", len(recs), time.Since(began).Round(time.Millisecond))
		})
	}
}

// TestDeadServer: a server that dies mid-run makes the remaining requests
// fail as connect errors; the run still ends, with every request recorded.
func TestDeadServer(t *testing.T) {
	srv := mocktest.Start(t, nil)
	path := writeTrace(t, conv("a", 4, 0, 30*time.Millisecond, 3), conv("b", 4, 0, 30*time.Millisecond, 3))
	r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, Model: "m", ContinuousUsage: "off"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		for r.Stats().Done < 2 {
			time.Sleep(time.Millisecond)
		}
		srv.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil || res.Canceled != "" {
		t.Fatalf("run: %v %+v", err, res)
	}
	recs := sink.byID()
	if len(recs) != 8 {
		t.Fatalf("%d records, want 8", len(recs))
	}
	failed := 0
	for _, rec := range recs {
		if rec.ErrorKind == trace.ErrConnect {
			failed++
		}
	}
	if failed < 4 {
		t.Errorf("%d connect errors after the server died, want >= 4", failed)
	}
}
