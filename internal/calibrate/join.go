package calibrate

import (
	"math"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

// Joined is the pairing of one step's recording with the mock's log.
type Joined struct {
	// Diffs are client stamp minus server write time, ns, one per matched
	// event (absolute: RunMeta.StartMonoNs + Record.EventNs[i] minus
	// LogEntry.EventMonoNs[i]), sorted ascending.
	Diffs []int64
	// Requests counts records; RequestsUnmatched those with no log entry
	// plus log entries (of the step) with no record.
	Requests, RequestsUnmatched int
	// EventsClient and EventsServer count the events on each side;
	// Unmatched those without a partner at the same index.
	EventsClient, EventsServer, Unmatched int
	// Errors counts records with an error kind.
	Errors int
	// TokenMismatches counts matched streamed events whose token counts
	// differ between the two sides (with exact usage on the client side,
	// a sign that event i of one is not event i of the other).
	TokenMismatches int
	// Bodies counts matched requests joined on their body rather than
	// on events (non-streaming answers: see Join).
	Bodies int
	// FirstDiffs are the Diffs of each matched request's first event
	// (the server's first-event write to the client's stamp of it: what the
	// client adds to TTFT), sorted.
	FirstDiffs []int64
	// FirstNs and LastNs bound the matched client stamps (run-relative).
	FirstNs, LastNs int64

	// ServerFirstNs is the step's earliest server write time (absolute
	// CLOCK_MONOTONIC ns, over the step's log entries), 0 without any.
	ServerFirstNs int64
	// SteadyFromNs and SteadyToNs bound the steady-state window in server
	// write time (absolute ns), the span in which every stream of the step
	// is open but at most k = floor(n/100) stragglers at either end (n log
	// entries with events):
	//
	//	SteadyFromNs = the (k+1)-th latest first write of the step's entries
	//	SteadyToNs   = the (k+1)-th earliest last write
	//
	// (k = 0 below 100 streams: the latest first write, the earliest last
	// one). One stream whose connection took seconds (a SYN retransmitted
	// after the server's accept queue overflowed) would otherwise leave a
	// 10,000-stream step no window at all. SteadyFromNs >= SteadyToNs when
	// the streams never were open together (rate steps' short requests):
	// there is no window.
	SteadyFromNs, SteadyToNs int64
	// SteadyDiffs are the Diffs of the matched events written strictly
	// inside the window (SteadyFromNs < write time < SteadyToNs), sorted.
	SteadyDiffs []int64
}

// SteadyWindowNs is the length of the steady-state window, 0 if none.
func (j *Joined) SteadyWindowNs() int64 { return max(0, j.SteadyToNs-j.SteadyFromNs) }

// Matched is the number of event pairs.
func (j *Joined) Matched() int { return len(j.Diffs) }

// Join pairs records with log entries by request id (the X-Request-Id
// replay sends, which the mock logs) and events by index: the two sides
// list exactly the same events (those with output: chat's role chunk
// included; Responses' and Messages' opening, closing and ping events on
// neither side), so event i of one is event i of the other. A
// non-streaming answer (embeddings, rerank, score, or stream false) is one
// body: the client's one event, stamped when the body's read completed, is
// paired with the mock's write of that body (LogEntry.HeadersMonoNs: the
// mock stamps it just before writing headers and body, having recorded the
// entry, so that a client holding the answer finds it in the log); the
// constant write and transit time is in the probe's offset as for events,
// but the mock's own writing of a large body (several segments) is in the
// error. Only log entries
// whose id starts with prefix take part (a shared remote mock also logs
// other steps' requests). startMono is the recording's RunMeta.StartMonoNs.
//
// The steady-state window (see SteadyFromNs) leaves out the ramp, in which
// the streams' connections open while earlier streams already emit, and
// the tail, in which streams end one by one; its diffs are the client's
// error under the step's full, settled load.
func Join(recs []trace.Record, startMono int64, log []mock.LogEntry, prefix string) *Joined {
	byID := make(map[string]*mock.LogEntry, len(log))
	for i := range log {
		if strings.HasPrefix(log[i].RequestID, prefix) {
			byID[log[i].RequestID] = &log[i]
		}
	}
	j := &Joined{Requests: len(recs), FirstNs: 1<<63 - 1}
	seen := make(map[string]bool, len(recs))
	var writes []int64 // server write time of Diffs[i], until the sort
	for i := range recs {
		r := &recs[i]
		j.EventsClient += len(r.EventNs)
		if r.ErrorKind != trace.ErrNone {
			j.Errors++
		}
		e, ok := byID[r.RequestID]
		if !ok || seen[r.RequestID] {
			j.RequestsUnmatched++
			j.Unmatched += len(r.EventNs)
			continue
		}
		seen[r.RequestID] = true
		ev := serverEvents(e)
		n := min(len(r.EventNs), len(ev))
		j.Unmatched += len(r.EventNs) - n + len(ev) - n
		if n > 0 {
			j.FirstDiffs = append(j.FirstDiffs, startMono+r.EventNs[0]-ev[0])
			if !e.Stream {
				j.Bodies++
			}
		}
		for k := range n {
			j.Diffs = append(j.Diffs, startMono+r.EventNs[k]-ev[k])
			writes = append(writes, ev[k])
			j.FirstNs, j.LastNs = min(j.FirstNs, r.EventNs[k]), max(j.LastNs, r.EventNs[k])
			if e.Stream && r.TokensExact && k < len(r.EventTokens) && k < len(e.EventTokens) && r.EventTokens[k] != e.EventTokens[k] {
				j.TokenMismatches++
			}
		}
	}
	for id, e := range byID {
		ev := serverEvents(e)
		j.EventsServer += len(ev)
		if !seen[id] {
			j.RequestsUnmatched++
			j.Unmatched += len(ev)
		}
	}
	if len(j.Diffs) == 0 {
		j.FirstNs = 0
	}
	j.steady(byID, writes)
	slices.Sort(j.Diffs)
	slices.Sort(j.FirstDiffs)
	return j
}

// steady sets the steady-state window from the step's log entries and
// picks the diffs (still parallel to writes) written inside it.
func (j *Joined) steady(byID map[string]*mock.LogEntry, writes []int64) {
	var firsts, lasts []int64
	for _, e := range byID {
		if ev := serverEvents(e); len(ev) > 0 {
			firsts, lasts = append(firsts, ev[0]), append(lasts, ev[len(ev)-1])
		}
	}
	if len(firsts) == 0 {
		return
	}
	slices.Sort(firsts)
	slices.Sort(lasts)
	k := len(firsts) / 100
	j.ServerFirstNs = firsts[0]
	j.SteadyFromNs, j.SteadyToNs = firsts[len(firsts)-1-k], lasts[k]
	if j.SteadyFromNs >= j.SteadyToNs {
		return
	}
	for i, w := range writes {
		if j.SteadyFromNs < w && w < j.SteadyToNs {
			j.SteadyDiffs = append(j.SteadyDiffs, j.Diffs[i])
		}
	}
	slices.Sort(j.SteadyDiffs)
}

// serverEvents is what the mock wrote of e's answer, in the clients's
// event terms: a stream's events, or a non-streaming answer's body as one
// event (its write, when the mock answered 200; none otherwise).
func serverEvents(e *mock.LogEntry) []int64 {
	if e.Stream || len(e.EventMonoNs) > 0 {
		return e.EventMonoNs
	}
	if e.Status == 200 && e.HeadersMonoNs != 0 {
		return []int64{e.HeadersMonoNs}
	}
	return nil
}

// quantile returns the q-quantile of sorted by the nearest-rank method
// (the smallest value with at least q of the values at or below it); 0
// when empty.
func quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
