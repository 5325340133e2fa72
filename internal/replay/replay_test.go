package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// TestScheduleAndEventsAgainstMock replays a small closed-loop trace and
// checks the schedule (turn 0 at its offset, turn k its think time after
// turn k-1 ended), the order of every record's stamps, and every event
// time against the mock's ground-truth log.
func TestScheduleAndEventsAgainstMock(t *testing.T) {
	srv := mocktest.Start(t, nil)
	think := 20 * time.Millisecond
	var convs [][]trace.Turn
	for i := range 4 {
		convs = append(convs, conv(fmt.Sprintf("c%d", i), 3, time.Duration(i)*30*time.Millisecond, think, 5))
	}
	sink, res := run(t, Config{Trace: writeTrace(t, convs...), Targets: []string{srv.URL()}, IgnoreEOS: true})
	if res.Canceled != "" || res.Errors != 0 || res.Sent != 12 {
		t.Fatalf("result %+v, want 12 sent, no errors, not canceled", res)
	}
	recs := sink.byID()
	if len(recs) != 12 {
		t.Fatalf("%d records, want 12", len(recs))
	}
	logs := map[string]mock.LogEntry{}
	for _, e := range srv.Log() {
		logs[e.RequestID] = e
	}
	start := sink.RunMeta().StartMonoNs
	if start == 0 || sink.RunMeta().Health == nil || sink.RunMeta().Config["model"] != "tracekit-mock" {
		t.Fatalf("run meta incomplete: %+v", sink.RunMeta())
	}
	var lags []int64
	for _, c := range convs {
		for k, turn := range c {
			id := fmt.Sprintf("%s-%d-0", turn.ConversationID, k)
			r, ok := recs[id]
			if !ok {
				t.Fatalf("no record %s", id)
			}
			want := turn.StartOffsetNs
			if k > 0 {
				want = recs[fmt.Sprintf("%s-%d-0", turn.ConversationID, k-1)].DoneNs + int64(think)
			}
			if r.IntendedNs != want {
				t.Errorf("%s: intended %d, want %d", id, r.IntendedNs, want)
			}
			if !(r.IntendedNs <= r.SlotNs && r.SlotNs <= r.SentNs && r.SentNs <= r.HeadersNs && r.HeadersNs <= r.DoneNs) {
				t.Errorf("%s: stamps out of order: intended %d slot %d sent %d headers %d done %d", id, r.IntendedNs, r.SlotNs, r.SentNs, r.HeadersNs, r.DoneNs)
			}
			lags = append(lags, r.SentNs-r.IntendedNs)
			if r.CompletionTokens != 5 || !r.TokensExact || r.Status != 200 || r.MaxTokens != 5 {
				t.Errorf("%s: completion %d exact %v status %d max %d", id, r.CompletionTokens, r.TokensExact, r.Status, r.MaxTokens)
			}
			var sum int32
			for _, n := range r.EventTokens {
				sum += n
			}
			if sum != 5 {
				t.Errorf("%s: event tokens sum to %d, want 5", id, sum)
			}
			e, ok := logs[id]
			if !ok {
				t.Fatalf("mock log has no %s (X-Request-Id not sent?)", id)
			}
			if len(e.EventMonoNs) != len(r.EventNs) {
				t.Fatalf("%s: %d events recorded, mock wrote %d", id, len(r.EventNs), len(e.EventMonoNs))
			}
			for i := range r.EventNs {
				// Same clock: the mock writes event i after it logged the
				// one before (the headers for event 0), so the client
				// cannot have it earlier (1 ms for the kernel stamp's
				// conversion). The log of event i itself follows its
				// write, delayed by any amount on a loaded machine. A clock
				// or join mistake is off by far more than these bounds.
				prev := e.HeadersMonoNs
				if i > 0 {
					prev = e.EventMonoNs[i-1]
				}
				got := start + r.EventNs[i]
				if got < prev-int64(time.Millisecond) || got-e.EventMonoNs[i] > int64(5*time.Second) {
					t.Errorf("%s event %d: client stamp %d, the mock logged the write before it at %d and its own at %d", id, i, got, prev, e.EventMonoNs[i])
				}
			}
			// Causality on one clock: the server cannot have read the
			// request before the client had a slot to send it.
			if slot := start + r.SlotNs; slot > e.ArrivalMonoNs {
				t.Errorf("%s: slot at %d, after the mock read the request at %d", id, slot, e.ArrivalMonoNs)
			}
		}
	}
	slices.Sort(lags)
	t.Logf("send lag (sent - intended): p50 %v max %v", time.Duration(lags[len(lags)/2]), time.Duration(lags[len(lags)-1]))
}

// sseServer is a loopback OpenAI-style server whose answer to request X is
// "answer-to-X"; it keeps every request body.
type sseServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string]map[string]any
}

func newSSEServer(t *testing.T) *sseServer {
	s := &sseServer{bodies: map[string]map[string]any{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" {
			w.Write([]byte(`{"data":[{"id":"echo"}]}`))
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		id := r.Header.Get("X-Request-Id")
		s.mu.Lock()
		s.bodies[id] = body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range []string{"answer-", "to-", id} {
			if r.URL.Path == "/v1/completions" {
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":%q}]}\n\n", part)
			} else {
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", part)
			}
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// messages returns the chat messages request id carried, as role:content.
func (s *sseServer) messages(t *testing.T, id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bodies[id]
	if !ok {
		t.Fatalf("server never received %s", id)
	}
	var out []string
	for _, m := range b["messages"].([]any) {
		m := m.(map[string]any)
		out = append(out, m["role"].(string)+":"+m["content"].(string))
	}
	return out
}

// TestHistoryCarried checks that turn k carries every earlier message and
// the server's actual answers, or the reference answers with
// --history reference, and that plain completions concatenate it.
func TestHistoryCarried(t *testing.T) {
	c := conv("h", 3, 0, 0, 3)
	sys, u := func(k int) string { return "user:" + c[k].Messages[len(c[k].Messages)-1].Content }, "system:You are terse."
	for _, mode := range []History{HistoryActual, HistoryReference} {
		t.Run(string(mode), func(t *testing.T) {
			srv := newSSEServer(t)
			run(t, Config{Trace: writeTrace(t, c), Targets: []string{srv.URL}, History: mode})
			answer := func(k int) string {
				if mode == HistoryReference {
					return "assistant:" + c[k].ReferenceAnswer
				}
				return fmt.Sprintf("assistant:answer-to-h-%d-0", k)
			}
			want := []string{u, sys(0), answer(0), sys(1), answer(1), sys(2)}
			if got := srv.messages(t, "h-2-0"); !slices.Equal(got, want) {
				t.Errorf("turn 2 messages:\n got %q\nwant %q", got, want)
			}
			if got := srv.messages(t, "h-1-0"); !slices.Equal(got, want[:4]) {
				t.Errorf("turn 1 messages:\n got %q\nwant %q", got, want[:4])
			}
		})
	}
	t.Run("completions", func(t *testing.T) {
		srv := newSSEServer(t)
		run(t, Config{Trace: writeTrace(t, c), Targets: []string{srv.URL}, Endpoint: EndpointCompletions, Model: "m"})
		srv.mu.Lock()
		prompt, _ := srv.bodies["h-1-0"]["prompt"].(string)
		srv.mu.Unlock()
		want := strings.Join([]string{"You are terse.", c[0].Messages[1].Content, "answer-to-h-0-0", c[1].Messages[0].Content}, "\n\n")
		if prompt != want {
			t.Errorf("completions prompt:\n got %q\nwant %q", prompt, want)
		}
	})
}

// lateDispatcher wakes every waiter late by over.
type lateDispatcher struct{ over time.Duration }

func (d lateDispatcher) WaitUntil(ctx context.Context, at int64) (int64, error) {
	return SleepDispatcher{}.WaitUntil(ctx, at+int64(d.over))
}

// TestTimingTraceRecordsLateSends: a request whose arrival time has
// already passed when it is ready (here every feeder wake-up comes 30 ms
// late, past the lookahead) leaves late, and that lateness is in the run's
// dispatch lag instead of being skipped as "no wait": in open loop, and for
// a conversation's first turn in closed loop, whose instant is its arrival
// too.
func TestTimingTraceRecordsLateSends(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var convs [][]trace.Turn
	for i := range 4 {
		convs = append(convs, conv(fmt.Sprintf("c%d", i), 1, time.Duration(i)*10*time.Millisecond, 0, 2))
	}
	const over = 30 * time.Millisecond
	for _, timing := range []Timing{TimingTrace, TimingClosed} {
		sink, res := run(t, Config{Trace: writeTrace(t, convs...), Targets: []string{srv.URL()}, Timing: timing,
			IgnoreEOS: true, Dispatcher: lateDispatcher{over}})
		if res.Errors != 0 || res.Sent != 4 {
			t.Fatalf("%s: result %+v", timing, res)
		}
		late := over - time.Duration(lookahead)
		for _, r := range sink.byID() {
			if d := time.Duration(r.SentNs - r.IntendedNs); d < late {
				t.Fatalf("%s: %s left %v after its arrival time, want at least %v (the dispatcher was late)", timing, r.RequestID, d, late)
			}
		}
		h := res.Meta.Health
		if h == nil || time.Duration(h.DispatchLagP50Ns) < late {
			t.Fatalf("%s: health %+v: dispatch lag p50 below the %v every send was late by", timing, h, late)
		}
	}
}

// TestTimingTrace checks open-loop replay: every turn leaves at its own
// arrival offset, before the previous turn's answer is over, carrying the
// reference history.
func TestTimingTrace(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(40 * time.Millisecond) })
	c := conv("o", 3, 10*time.Millisecond, 0, 20) // arrivals 20 ms apart, answers take 800 ms
	sink, res := run(t, Config{Trace: writeTrace(t, c), Targets: []string{srv.URL()}, Timing: TimingTrace, IgnoreEOS: true})
	if res.Errors != 0 || res.Sent != 3 {
		t.Fatalf("result %+v", res)
	}
	recs := sink.byID()
	for k, turn := range c {
		r := recs[fmt.Sprintf("o-%d-0", k)]
		if r.IntendedNs != turn.ArrivalOffsetNs {
			t.Errorf("turn %d intended %d, want its arrival %d", k, r.IntendedNs, turn.ArrivalOffsetNs)
		}
	}
	if r0, r1 := recs["o-0-0"], recs["o-1-0"]; r1.SentNs >= r0.DoneNs {
		t.Errorf("turn 1 sent at %d, after turn 0 ended at %d: not open loop", r1.SentNs, r0.DoneNs)
	}
	for _, e := range srv.Log() {
		if e.RequestID == "o-2-0" {
			if !strings.Contains(string(e.Body), c[1].ReferenceAnswer) {
				t.Errorf("turn 2 body lacks the reference answer of turn 1: %s", e.Body)
			}
		}
	}
}
