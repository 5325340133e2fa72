package replay

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// TestFaultsRecordedAndRunContinues forces each mock fault on every request
// of a 2x2 trace: every request must be sent (the conversations go on) and
// recorded with the fault's error kind.
func TestFaultsRecordedAndRunContinues(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	srv := mocktest.Start(t, nil)
	path := writeTrace(t, conv("a", 2, 0, 0, 6), conv("b", 2, 5*time.Millisecond, 0, 6))
	for _, tc := range []struct {
		fault          string
		idle, request  time.Duration
		kind           trace.ErrorKind
		status         int32
		events, tokens int // events recorded (-1: don't check)
	}{
		{fault: "status=503", kind: trace.ErrHTTPStatus, status: 503, events: 0},
		{fault: "status=429", kind: trace.ErrHTTPStatus, status: 429, events: 0},
		{fault: "reset", kind: trace.ErrConnect, events: 0},
		{fault: "disconnect=3", kind: trace.ErrStreamTruncated, status: 200, events: 3},
		{fault: "stall=3s@2", idle: 300 * time.Millisecond, kind: trace.ErrIdleTimeout, status: 200, events: 2},
		{fault: "stall=3s@2", idle: 2 * time.Second, request: 400 * time.Millisecond, kind: trace.ErrTimeout, status: 200, events: 2},
		{fault: "malformed@2", kind: trace.ErrMalformed, status: 200, events: -1},
		{fault: "nodone", kind: trace.ErrStreamTruncated, status: 200, events: -1},
		{fault: "slowheaders=3s", request: 300 * time.Millisecond, kind: trace.ErrTimeout, events: 0},
	} {
		t.Run(fmt.Sprintf("%s/idle=%v/request=%v", tc.fault, tc.idle, tc.request), func(t *testing.T) {
			sink, res := run(t, Config{
				Trace: path, Targets: []string{srv.URL()}, Model: "m", ContinuousUsage: "on", IgnoreEOS: true,
				NoProbe:     true, // the fault header would fail the probe
				Headers:     map[string]string{mock.FaultHeader: tc.fault},
				IdleTimeout: tc.idle, RequestTimeout: tc.request,
			})
			if res.Sent != 4 || res.Errors != 4 || res.Canceled != "" {
				t.Fatalf("result %+v, want 4 sent, 4 errors", res)
			}
			for id, r := range sink.byID() {
				if r.ErrorKind != tc.kind || r.Status != tc.status {
					t.Errorf("%s: kind %q status %d (%s), want %q %d", id, r.ErrorKind, r.Status, r.ErrorMessage, tc.kind, tc.status)
				}
				if tc.events >= 0 && len(r.EventNs) != tc.events {
					t.Errorf("%s: %d events, want %d", id, len(r.EventNs), tc.events)
				}
				if r.ErrorMessage == "" {
					t.Errorf("%s: no error message", id)
				}
			}
		})
	}
}

// interval is one request's [sent, done].
type interval struct{ from, to int64 }

// TestMaxConcurrencyQueueTime runs four conversations that all start at
// once through one slot: requests never overlap, and the time spent
// waiting for the slot is recorded as queue time (slot - intended).
func TestMaxConcurrencyQueueTime(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var convs [][]trace.Turn
	for i := range 4 {
		convs = append(convs, conv(fmt.Sprintf("q%d", i), 2, 0, 0, 5))
	}
	sink, res := run(t, Config{Trace: writeTrace(t, convs...), Targets: []string{srv.URL()}, MaxConcurrency: 1, IgnoreEOS: true})
	if res.Sent != 8 || res.Errors != 0 {
		t.Fatalf("result %+v", res)
	}
	var iv []interval
	queued := 0
	for _, r := range sink.byID() {
		iv = append(iv, interval{r.SlotNs, r.DoneNs})
		if r.SlotNs-r.IntendedNs > int64(2*time.Millisecond) {
			queued++
		}
	}
	sort.Slice(iv, func(i, j int) bool { return iv[i].from < iv[j].from })
	for i := 1; i < len(iv); i++ {
		if iv[i].from < iv[i-1].to {
			t.Errorf("requests overlap with --max-concurrency 1: %v and %v", iv[i-1], iv[i])
		}
	}
	// Each request takes >= 7 ms at the mock; of the four first turns,
	// three must have waited for the slot.
	if queued < 3 {
		t.Errorf("%d requests recorded queue time, want >= 3", queued)
	}
}

// TestMaxActiveConversations runs conversations one at a time: each one's
// first request waits until the previous conversation is over.
func TestMaxActiveConversations(t *testing.T) {
	srv := mocktest.Start(t, nil)
	path := writeTrace(t, conv("x", 2, 0, 0, 4), conv("y", 2, 0, 0, 4), conv("z", 2, 0, 0, 4))
	sink, res := run(t, Config{Trace: path, Targets: []string{srv.URL()}, MaxActiveConversations: 1, IgnoreEOS: true})
	if res.Sent != 6 {
		t.Fatalf("result %+v", res)
	}
	recs := sink.byID()
	if x, y := recs["x-1-0"], recs["y-0-0"]; y.SentNs < x.DoneNs {
		t.Errorf("y started at %d before x ended at %d", y.SentNs, x.DoneNs)
	}
	if y, z := recs["y-1-0"], recs["z-0-0"]; z.SentNs < y.DoneNs {
		t.Errorf("z started at %d before y ended at %d", z.SentNs, y.DoneNs)
	}
}

// TestMaxRequestsAndWarmup: --warmup 2 marks the first two requests, and
// --max-requests 3 then allows exactly three measured ones.
func TestMaxRequestsAndWarmup(t *testing.T) {
	srv := mocktest.Start(t, nil)
	path := writeTrace(t, conv("a", 3, 0, 0, 3), conv("b", 3, 50*time.Millisecond, 0, 3), conv("c", 3, 100*time.Millisecond, 0, 3))
	sink, res := run(t, Config{Trace: path, Targets: []string{srv.URL()}, Warmup: 2, MaxRequests: 3})
	recs := sink.byID()
	if res.Sent != 5 || len(recs) != 5 {
		t.Fatalf("sent %d, %d records, want 5", res.Sent, len(recs))
	}
	warm := 0
	var first []int64
	for _, r := range recs {
		if r.Warmup {
			warm++
		}
		first = append(first, r.SlotNs)
	}
	if warm != 2 {
		t.Errorf("%d warm-up records, want 2", warm)
	}
	sort.Slice(first, func(i, j int) bool { return first[i] < first[j] })
	for _, r := range recs {
		if r.Warmup != (r.SlotNs <= first[1]) {
			t.Errorf("%s warmup=%v but it was not among the first two sent", r.RequestID, r.Warmup)
		}
	}
}

// TestBenchmarkTimeoutCancelsInFlight: slow streams cut by
// --benchmark-timeout are recorded as canceled with their partial events,
// and the run returns promptly.
func TestBenchmarkTimeoutCancelsInFlight(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(50 * time.Millisecond) })
	path := writeTrace(t, conv("s", 2, 0, 0, 100), conv("t", 2, 0, 0, 100))
	began := time.Now()
	sink, res := run(t, Config{Trace: path, Targets: []string{srv.URL()}, IgnoreEOS: true, BenchmarkTimeout: 500 * time.Millisecond})
	if el := time.Since(began); el > 20*time.Second {
		t.Fatalf("run took %v after a 500ms benchmark timeout", el)
	}
	if res.Canceled == "" {
		t.Errorf("result does not say the run was cut short: %+v", res)
	}
	recs := sink.byID()
	if len(recs) != 2 {
		t.Fatalf("%d records, want the 2 in flight", len(recs))
	}
	for id, r := range recs {
		if r.ErrorKind != trace.ErrCanceled || len(r.EventNs) == 0 || r.DoneNs == 0 {
			t.Errorf("%s: kind %q, %d events, done %d; want canceled with partial events", id, r.ErrorKind, len(r.EventNs), r.DoneNs)
		}
	}
	if sink.RunMeta().Health == nil {
		t.Error("no health in the run meta")
	}
}

// TestContextCancelStopsWaiting: canceling during a long think time ends
// the run at once, without sending the next turn.
func TestContextCancelStopsWaiting(t *testing.T) {
	srv := mocktest.Start(t, nil)
	r, err := New(Config{Trace: writeTrace(t, conv("w", 2, 0, time.Hour, 2)), Targets: []string{srv.URL()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1 || len(sink.byID()) != 1 || res.Canceled == "" {
		t.Errorf("result %+v with %d records, want 1 sent and canceled", res, len(sink.byID()))
	}
}

// TestTargetsAndShards: round-robin spreads requests over two servers,
// the conversation policy keeps each conversation on one, and two shards
// together replay every conversation exactly once.
func TestTargetsAndShards(t *testing.T) {
	a, b := mocktest.Start(t, nil), mocktest.Start(t, nil)
	var convs [][]trace.Turn
	for i := range 6 {
		convs = append(convs, conv(fmt.Sprintf("m%d", i), 2, 0, 0, 2))
	}
	path := writeTrace(t, convs...)
	targets := []string{a.URL(), b.URL()}

	sink, _ := run(t, Config{Trace: path, Targets: targets, Model: "m"})
	per := map[string]int{}
	for _, r := range sink.byID() {
		per[r.Target]++
	}
	if per[a.URL()] != 6 || per[b.URL()] != 6 {
		t.Errorf("round-robin split %v, want 6 and 6", per)
	}

	sink, _ = run(t, Config{Trace: path, Targets: targets, Model: "m", Policy: PolicyConversation})
	where := map[string]string{}
	for _, r := range sink.byID() {
		if w, ok := where[r.ConversationID]; ok && w != r.Target {
			t.Errorf("conversation %s went to %s and %s", r.ConversationID, w, r.Target)
		}
		where[r.ConversationID] = r.Target
	}

	seen := map[string]int32{}
	for shard := range 2 {
		sink, _ := run(t, Config{Trace: path, Targets: targets[:1], Model: "m", Shard: shard, Shards: 2})
		for _, r := range sink.byID() {
			if r.Shard != int32(shard) {
				t.Errorf("%s recorded shard %d, want %d", r.RequestID, r.Shard, shard)
			}
			if _, dup := seen[r.RequestID]; dup {
				t.Errorf("%s replayed by both shards", r.RequestID)
			}
			seen[r.RequestID] = r.Shard
		}
	}
	if len(seen) != 12 {
		t.Errorf("shards replayed %d requests together, want 12", len(seen))
	}
}
