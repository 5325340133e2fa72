package replay

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// dueSeq is a dueClock whose NextDue returns its values in turn, then 0.
type dueSeq struct {
	at    []int64
	calls atomic.Int64
}

func (d *dueSeq) NextDue() int64 {
	i := int(d.calls.Add(1)) - 1
	if i < len(d.at) {
		return d.at[i]
	}
	return 0
}

func (d *dueSeq) Margin() time.Duration { return 0 }

// A media worker's pause sleeps past a request due within the gate's lead,
// asks again, and goes on; it does not ask the clock at all while the
// look-ahead is not well ahead, goes on at once when nothing is due soon,
// and sleeps at most gatePauses times however many requests come due.
// Checked on the order of instants and on the clock's calls, not on how
// long anything took.
func TestMediaGatePausesAroundDueRequests(t *testing.T) {
	ahead := func() bool { return true }

	behind := &dueSeq{at: []int64{clock.Mono()}}
	(&mediaGate{clock: behind, ahead: func() bool { return false }}).pause()
	if n := behind.calls.Load(); n != 0 {
		t.Errorf("behind: the pause asked the clock %d times, want 0", n)
	}

	far := &dueSeq{at: []int64{clock.Mono() + int64(time.Hour)}}
	(&mediaGate{clock: far, ahead: ahead}).pause()
	if n := far.calls.Load(); n != 1 {
		t.Errorf("nothing due soon: the pause asked the clock %d times, want 1 (no sleep)", n)
	}

	due := clock.Mono() + int64(gateLead)/2
	soon := &dueSeq{at: []int64{due}}
	(&mediaGate{clock: soon, ahead: ahead}).pause()
	if now := clock.Mono(); now < due+int64(gateAfter) {
		t.Errorf("a request due within the lead: the pause returned %v before it was due plus gateAfter", time.Duration(due+int64(gateAfter)-now))
	}
	if n := soon.calls.Load(); n != 2 {
		t.Errorf("a request due within the lead: the pause asked the clock %d times, want 2 (before and after its sleep)", n)
	}

	var n atomic.Int64
	stops := &dueSeq{at: []int64{clock.Mono(), clock.Mono()}}
	(&mediaGate{clock: stops, ahead: func() bool { return n.Add(1) == 1 }}).pause()
	if c := stops.calls.Load(); c != 1 {
		t.Errorf("the look-ahead fell behind during a sleep: the pause asked the clock %d times, want 1", c)
	}

	always := &dueSeq{}
	for range 2 * gatePauses {
		always.at = append(always.at, clock.Mono())
	}
	(&mediaGate{clock: always, ahead: ahead}).pause()
	if c := always.calls.Load(); c != gatePauses {
		t.Errorf("requests always due: the pause asked the clock %d times, want gatePauses (%d)", c, gatePauses)
	}
}
