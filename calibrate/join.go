package calibrate

import (
	"math"
	"slices"
	"strings"

	"github.com/tracekit/tracekit/mock"
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
	// FirstNs and LastNs bound the matched client stamps (run-relative).
	FirstNs, LastNs int64
}

// Matched is the number of event pairs.
func (j *Joined) Matched() int { return len(j.Diffs) }

// Join pairs records with log entries by request id (the X-Request-Id
// replay sends, which the mock logs) and events by index: the two sides
// list exactly the same events (non-empty choices, chat's role chunk
// included), so event i of one is event i of the other. Only log entries
// whose id starts with prefix take part (a shared remote mock also logs
// other steps' requests). startMono is the recording's RunMeta.StartMonoNs.
func Join(recs []trace.Record, startMono int64, log []mock.LogEntry, prefix string) *Joined {
	byID := make(map[string]*mock.LogEntry, len(log))
	for i := range log {
		if strings.HasPrefix(log[i].RequestID, prefix) {
			byID[log[i].RequestID] = &log[i]
		}
	}
	j := &Joined{Requests: len(recs), FirstNs: 1<<63 - 1}
	seen := make(map[string]bool, len(recs))
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
		n := min(len(r.EventNs), len(e.EventMonoNs))
		j.Unmatched += len(r.EventNs) - n + len(e.EventMonoNs) - n
		for k := range n {
			j.Diffs = append(j.Diffs, startMono+r.EventNs[k]-e.EventMonoNs[k])
			j.FirstNs, j.LastNs = min(j.FirstNs, r.EventNs[k]), max(j.LastNs, r.EventNs[k])
		}
	}
	for id, e := range byID {
		j.EventsServer += len(e.EventMonoNs)
		if !seen[id] {
			j.RequestsUnmatched++
			j.Unmatched += len(e.EventMonoNs)
		}
	}
	if len(j.Diffs) == 0 {
		j.FirstNs = 0
	}
	slices.Sort(j.Diffs)
	return j
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
