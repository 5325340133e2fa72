package replay

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// checkServedOnce asserts that the run recorded every request without an
// error and that the server read each of them exactly once, under the id
// the recording holds.
func checkServedOnce(t *testing.T, sink *memSink, res *Result, srv *hostileServer, want int) {
	t.Helper()
	if res.Errors != 0 || res.Sent != int64(want) {
		for _, r := range sink.Records() {
			if r.ErrorKind != "" {
				t.Errorf("%s (attempt %d): %s: %s", r.RequestID, r.Attempt, r.ErrorKind, r.ErrorMessage)
			}
		}
		t.Fatalf("result %+v, want %d sent without errors", res, want)
	}
	ids, _ := srv.requests()
	var recorded []string
	for _, r := range sink.Records() {
		recorded = append(recorded, r.RequestID)
		if r.Attempt > 0 && !strings.HasSuffix(r.RequestID, fmt.Sprintf("-%d", r.Attempt)) {
			t.Errorf("%s: attempt %d but the id does not say so", r.RequestID, r.Attempt)
		}
	}
	slices.Sort(ids)
	slices.Sort(recorded)
	if !slices.Equal(ids, recorded) {
		t.Errorf("the server read %v, the recording holds %v", ids, recorded)
	}
}

// A server that closes every connection after its response without
// Connection: close: a request that takes a pooled connection finds it
// dead (EOF or reset before any response byte). It
// is sent again at once on a fresh connection and recorded as attempt 1,
// with no error; its send time is the second write.
func TestClosedKeepAliveRetriedOnFreshConnection(t *testing.T) {
	srv := startHostile(t, &hostileServer{closeAfter: true})
	path := writeTrace(t, conv("a", 4, 0, 50*time.Millisecond, 3))
	sink, res := run(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m", ContinuousUsage: "on"})
	checkServedOnce(t, sink, res, srv, 4)
	for _, r := range sink.Records() {
		// The probe leaves a dead connection in the pool: turn 0 takes it
		// and is retried; the retry's connection closes (Connection:
		// close), so turn 1 dials anew and leaves a dead one for turn 2.
		want := 1 - r.Turn%2
		if r.Attempt != want || r.TokensExact != true || len(r.EventNs) != 3 {
			t.Errorf("%s: attempt %d (want %d), exact %v, %d events", r.RequestID, r.Attempt, want, r.TokensExact, len(r.EventNs))
		}
		if !(r.SlotNs <= r.SentNs && r.SentNs <= r.HeadersNs) {
			t.Errorf("%s: slot %d sent %d headers %d out of order", r.RequestID, r.SlotNs, r.SentNs, r.HeadersNs)
		}
	}
	if _, conns := srv.requests(); conns != 4 {
		t.Errorf("%d connections for 4 requests on a server that closes each", conns)
	}
}

// A server that silently closes keep-alive connections idle for 150 ms,
// with think times of 400 ms between turns (uvicorn's 5 s against a user's
// 7 s, scaled down), and an --idle-conn-timeout too long to catch it:
// the retry alone keeps every request error-free and sent once.
func TestIdleClosedKeepAliveNoInventedErrors(t *testing.T) {
	srv := startHostile(t, &hostileServer{idleClose: 150 * time.Millisecond})
	var convs [][]trace.Turn
	for i := range 3 {
		convs = append(convs, conv(fmt.Sprintf("c%d", i), 3, time.Duration(i)*20*time.Millisecond, 400*time.Millisecond, 3))
	}
	sink, res := run(t, Config{Trace: writeTrace(t, convs...), Targets: []string{srv.url()}, Model: "m",
		ContinuousUsage: "on", IdleConnTimeout: time.Minute})
	checkServedOnce(t, sink, res, srv, 9)
}

// A pooled connection idle longer than --idle-conn-timeout is never given
// to a request: with a 100 ms limit and 300 ms think times, every request
// of a conversation goes out on its own connection, at its first attempt,
// although the server would have kept the old one open.
func TestIdleConnTimeoutNotReused(t *testing.T) {
	srv := startHostile(t, &hostileServer{})
	path := writeTrace(t, conv("a", 3, 0, 300*time.Millisecond, 3))
	sink, res := run(t, Config{Trace: path, Targets: []string{srv.url()}, Model: "m", ContinuousUsage: "on",
		IdleConnTimeout: 100 * time.Millisecond})
	checkServedOnce(t, sink, res, srv, 3)
	for _, r := range sink.Records() {
		if r.Attempt != 0 {
			t.Errorf("%s: attempt %d, want 0 (a stale connection must not be tried)", r.RequestID, r.Attempt)
		}
	}
	if _, conns := srv.requests(); conns != 3 {
		t.Errorf("%d connections for 3 requests 300 ms apart with --idle-conn-timeout 100ms, want 3", conns)
	}
	// And with the default limit the same run reuses one connection.
	srv2 := startHostile(t, &hostileServer{})
	sink, res = run(t, Config{Trace: path, Targets: []string{srv2.url()}, Model: "m", ContinuousUsage: "on"})
	checkServedOnce(t, sink, res, srv2, 3)
	if _, conns := srv2.requests(); conns != 1 {
		t.Errorf("%d connections for 3 requests 300 ms apart with the default --idle-conn-timeout, want 1", conns)
	}
}

// Think times of 2 s against the mock closing
// keep-alive connections idle for 1 s (uvicorn's behaviour, scaled): no
// error, and every request in the mock's ground-truth log exactly once.
func TestMockIdleCloseAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("2 s think times")
	}
	srv := mocktest.Start(t, func(c *mock.Config) { c.IdleClose = mock.Duration(time.Second) })
	var convs [][]trace.Turn
	for i := range 4 {
		convs = append(convs, conv(fmt.Sprintf("k%d", i), 3, time.Duration(i)*50*time.Millisecond, 2*time.Second, 4))
	}
	sink, res := run(t, Config{Trace: writeTrace(t, convs...), Targets: []string{srv.URL()}, IgnoreEOS: true})
	if res.Errors != 0 || res.Sent != 12 {
		for _, r := range sink.Records() {
			if r.ErrorKind != "" {
				t.Errorf("%s: %s: %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
		}
		t.Fatalf("result %+v, want 12 sent without errors", res)
	}
	logged := map[string]int{}
	for _, e := range srv.Log() {
		if strings.HasPrefix(e.RequestID, "k") {
			logged[e.RequestID]++
		}
	}
	retries := 0
	for _, r := range sink.Records() {
		if logged[r.RequestID] != 1 {
			t.Errorf("%s is in the mock's log %d times, want once", r.RequestID, logged[r.RequestID])
		}
		delete(logged, r.RequestID)
		if r.Attempt > 0 {
			retries++
		}
	}
	if len(logged) != 0 {
		t.Errorf("the mock served requests the recording does not hold: %v", logged)
	}
	t.Logf("%d of 12 requests were sent again on a fresh connection", retries)
}
