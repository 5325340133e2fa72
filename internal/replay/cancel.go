package replay

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tracekit/tracekit/internal/fnv1a"
	"github.com/tracekit/tracekit/trace"
)

// Sampler draws a value from a distribution (synth.Dist is one).
type Sampler interface {
	Sample(r *rand.Rand) float64
}

// cancelDelay says whether the request requestID is one replay cancels
// (Config.CancelRate) and after how long from the start of its send. The
// draws come from a generator seeded by the run's seed and the request id.
func (r *runState) cancelDelay(requestID string) (time.Duration, bool) {
	if r.cfg.CancelRate <= 0 {
		return 0, false
	}
	g := rand.New(rand.NewPCG(r.cfg.Seed, fnv1a.String(requestID)))
	if g.Float64() >= r.cfg.CancelRate {
		return 0, false
	}
	s := max(r.cfg.CancelAfter.Sample(g), 0)
	return time.Duration(s * float64(time.Second)), true
}

// settleCancel turns the timeout of a request replay meant to cancel into
// its own kind: the deadline that fired was the cancellation's.
func settleCancel(rec *trace.Record, after time.Duration) {
	switch rec.ErrorKind {
	case trace.ErrTimeout, trace.ErrHeadersTimeout, trace.ErrIdleTimeout:
		rec.ErrorKind = trace.ErrCanceledByClient
		rec.ErrorMessage = fmt.Sprintf("canceled by the client %v after the send began (--cancel-rate), after %d events", after, len(rec.EventNs))
	}
}
