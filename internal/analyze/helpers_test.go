package analyze

import (
	"errors"

	"github.com/tracekit/tracekit/trace"
)

func errorsIsBad(err error) bool { return errors.Is(err, ErrBadInput) }

// asStored rounds recs' event times, in place, to what a recording keeps
// of them (trace.Record.RoundEvents: to the microsecond from sent_ns) and
// returns recs: a reference computed from them is what an analysis of the
// file they were written to must give.
func asStored(recs []trace.Record) []trace.Record {
	for i := range recs {
		recs[i].RoundEvents()
	}
	return recs
}
