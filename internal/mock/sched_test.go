package mock

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlowClientLeavesScheduler sends a stream far larger than the socket
// buffers to a client that reads nothing until the scheduler's
// non-blocking write has come up short: the stream goes back to its
// handler goroutine, and the client still receives every byte in order.
func TestSlowClientLeavesScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	srv := startMock(t, func(c *Config) {
		c.Latency.PrefillBase, c.Latency.PrefillPerToken = 0, 0
		c.Latency.DecodeBase = Duration(100 * time.Nanosecond)
		c.Latency.TokensPerEvent = 8000 // ~40 kB per event
		c.Latency.MaxModelLen = 1 << 23
	})
	const tokens = 300 * 8000 // ~12 MB, beyond the server's send buffer (4 MB at most by default) and the client's below
	conn, err := net.Dial("tcp", srv.URL()[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A fixed receive buffer: autotuning may grow it past the whole
	// stream (tcp_rmem's maximum is 32 MB on some hosts).
	if err := conn.(*net.TCPConn).SetReadBuffer(256 << 10); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Minute)) // hang guard only
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"slow"}],"stream":true,"ignore_eos":true,"max_tokens":%d}`, tokens)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: slow\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "a scheduler write to come up short", func() bool { return srv.m.slowStreams.Load() > 0 })
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	events, done, err := sse(resp)
	if err != nil || !done {
		t.Fatalf("stream err %v, done %v after %d events; log %+v", err, done, len(events), srv.Log())
	}
	var text strings.Builder
	for _, c := range parseChunks(t, events) {
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
			text.WriteString(*c.Choices[0].Delta.Content)
		}
	}
	e := entryByID(t, srv, "slow")
	want, _ := GeneratedText(srv.cfg.Seed, e.MessagesHash, tokens)
	if text.String() != want {
		t.Fatalf("got %d bytes of text, want %d", text.Len(), len(want))
	}
	if e.Outcome != OutcomeOK || len(e.EventMonoNs) != 1+1+(tokens-1+7999)/8000 {
		t.Fatalf("outcome %s, %d events", e.Outcome, len(e.EventMonoNs))
	}
	if n := srv.m.slowStreams.Load(); n != 1 {
		t.Fatalf("%d streams left the scheduler, want 1", n)
	}
}

// TestGoroutineStreams runs the stream and fault tests with each stream on
// its own goroutine, the path a stream takes when it cannot use the
// scheduler.
func TestGoroutineStreams(t *testing.T) {
	goroutineStreams = true
	defer func() { goroutineStreams = false }()
	t.Run("sequence", TestChatStreamSequenceAndUsage)
	t.Run("completions", TestCompletionsStreamContinuousUsage)
	t.Run("faults", TestForcedFaults)
	t.Run("close", TestCloseCutsInFlightStreams)
}

// TestSchedulerHeap checks the heap keeps the earliest stream on top
// through pushes and removals from the middle.
func TestSchedulerHeap(t *testing.T) {
	s := &scheduler{}
	xs := make([]*exchange, 200)
	for i := range xs {
		xs[i] = &exchange{sched: int64((i * 7919) % 200), heapIdx: -1}
		s.push(xs[i])
	}
	for i := 0; i < len(xs); i += 3 {
		s.remove(xs[i].heapIdx)
	}
	last := int64(-1)
	n := 0
	for len(s.h) > 0 {
		for i, x := range s.h {
			if x.heapIdx != i {
				t.Fatalf("heapIdx %d at %d", x.heapIdx, i)
			}
		}
		x := s.h[0]
		s.remove(0)
		if x.sched < last || x.heapIdx != -1 {
			t.Fatalf("popped %d after %d (idx %d)", x.sched, last, x.heapIdx)
		}
		last, n = x.sched, n+1
	}
	if n != len(xs)-(len(xs)+2)/3 {
		t.Fatalf("popped %d", n)
	}
}
