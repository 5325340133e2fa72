package replay

import (
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// dueClock is a Dispatcher that can tell when its next waiter returns
// (clock.Precise on Linux).
type dueClock interface {
	NextDue() int64
	Margin() time.Duration
}

// mediaGate holds the media workers off the CPU around the instants when a
// request is due, while the look-ahead is well ahead. A worker calls pause
// between steps of a fraction of a millisecond (makeMedia); when the
// clock's next waiter returns within its margin plus gateLead, the worker
// sleeps until gateAfter past it.
//
// Priorities alone did not keep the workers out of the way: on a 2-vCPU VM
// (kernel preemption "none", 250 Hz) with the client pinned to one CPU,
// nice-19 workers encoding JPEGs ran for tens of milliseconds at a time
// while normal-priority threads of the process, woken, waited beside them
// (perf sched), and dispatches left up to a few milliseconds late. A worker
// asleep is not there to be preempted.
//
// The look-ahead pays with a pause of margin + gateLead + gateAfter per
// request at most, and only while it holds idleAhead conversations: when
// it falls behind, the workers stop pausing.
type mediaGate struct {
	clock dueClock
	ahead func() bool // the look-ahead is well ahead
}

const (
	// gateLead is added to the clock's margin: one step of a worker's work
	// and the wake-up of the thread that releases the waiter.
	gateLead = time.Millisecond
	// gateAfter is how long past a due instant a paused worker sleeps: the
	// waiter returns at its instant and then writes its request.
	gateAfter = 200 * time.Microsecond
	// gatePauses bounds the sleeps of one pause: requests due back to back
	// cannot hold a worker longer than this many of them.
	gatePauses = 16
)

// pause sleeps while a request is due soon and the look-ahead is well
// ahead.
func (g *mediaGate) pause() {
	for range gatePauses {
		if !g.ahead() {
			return
		}
		now := clock.Mono()
		due := g.clock.NextDue()
		if due == 0 || due-now > int64(g.clock.Margin()+gateLead) {
			return
		}
		time.Sleep(time.Duration(max(due-now, 0)) + gateAfter)
	}
}
