package mock

import "time"

// effect is what a fault does to one response. The request's handler, the
// unary path and the stream's event loop all act on it and on nothing
// else, so a fault means the same whichever path answers.
type effect struct {
	status      int           // answer this error status, no generation
	reset       bool          // a TCP reset before any response byte
	silent      bool          // read the request, then send nothing
	headerDelay time.Duration // response headers this much later

	// Positional faults, at event N (N events sent before it, as the log
	// counts them), -1 when absent. On a non-streaming response, N counts
	// the events the same request would have streamed; the body comes
	// after all of them, so any N in 0..events acts on the body.
	stallAt      int // pause stallFor before event stallAt; later events shift
	stallFor     time.Duration
	malformedAt  int // an invalid JSON event before event malformedAt (unary: a truncated body)
	disconnectAt int // close the connection before event disconnectAt (unary: instead of the body)
	errorAt      int // the API's error event when event errorAt is due, and the end (unary: a 500 error body)

	noDone bool     // end the stream without data: [DONE]
	gzip   bool     // compress whatever Accept-Encoding said
	unary  bool     // answer a non-streaming body although stream=true
	conn   connPlan // what happens to the connection after the response

	// broken: a response the fault let complete is still not what the
	// client asked for, and the log says OutcomeFault rather than OutcomeOK.
	broken bool
}

// outcome decides what f does to a response: streaming or not, of a
// request that would stream events events (plannedEvents). A positional
// fault beyond the last event, and a fault that has no meaning for the
// kind of response (nodone or json without stream), does nothing.
func (f Fault) outcome(stream bool, events int) effect {
	e := effect{stallAt: -1, malformedAt: -1, disconnectAt: -1, errorAt: -1}
	inRange := f.After >= 0 && f.After <= events
	switch f.Kind {
	case FaultStatus:
		e.status, e.broken = f.Status, true
	case FaultReset:
		e.reset, e.broken = true, true
	case FaultNoHeaders:
		e.silent, e.broken = true, true
	case FaultSlowHeaders:
		e.headerDelay = f.For
	case FaultStall:
		if inRange {
			e.stallAt, e.stallFor = f.After, f.For
		}
	case FaultMalformed:
		if inRange {
			e.malformedAt, e.broken = f.After, true
		}
	case FaultDisconnect:
		if inRange {
			e.disconnectAt, e.broken = f.After, true
		}
	case FaultError:
		if inRange {
			e.errorAt, e.broken = f.After, true
		}
	case FaultNoDone:
		e.noDone, e.broken = stream, stream
	case FaultGzip:
		e.gzip, e.broken = true, true
	case FaultJSON:
		e.unary, e.broken = stream, stream
	case FaultCloseAfter:
		e.conn.closeAfter = true
	case FaultIdleClose:
		e.conn.idleClose = f.For
	}
	return e
}

// logOutcome is the log's outcome of a response the fault let complete.
func (e *effect) logOutcome() string {
	if e.broken {
		return OutcomeFault
	}
	return OutcomeOK
}
