package sweep

import (
	"fmt"
	"sync"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// Early stop: a step is stopped once it is certain to fail, or once its
// SLO has been broken by a wide margin for long enough.
const (
	// WideMargin: an objective is broken by a wide margin when more than
	// its allowed share (100 - P)% of the samples so far exceed
	// WideMargin x its threshold (the running percentile is above it); the
	// error rate when it is above WideMargin x MaxErrorRate.
	WideMargin = 2.0
	// LongEnough: a wide-margin condition stops the step once it has held
	// without a break for a quarter of the step (of --step-requests
	// measured requests, or of --step-duration) ...
	LongEnough = 0.25
	// MinSamples: ... and at least this many measured requests finished.
	MinSamples = 20
)

// Watch is a record.Sink that hands every record on to its next sink and
// watches the step's measured (non-warm-up) requests for an early stop:
//
//   - certain failure, when the step has a planned count of N measured
//     requests: more than MaxErrorRate x N failed; or some objective of a
//     per-request metric (ttft, tpot, e2el) has at least N - floor((N-1)
//     P/100) samples above its threshold (the P-th percentile must then
//     exceed it, whatever the rest; see certainFailCount); or more than (1
//   - GoodputTarget) x N requests were not good;
//   - a wide margin held long enough (any step): see WideMargin,
//     LongEnough and MinSamples (itl counts every inter-token gap).
//
// Stop is called once, with the reason, from the goroutine that submitted
// the deciding record; records after it are still passed on.
type Watch struct {
	next    record.Sink
	crit    Criteria
	planned int           // measured requests the step will send at most; 0: unknown
	span    time.Duration // the step's duration when planned is 0
	stop    func(reason string)
	now     func() time.Time
	opts    analyze.Options // the step's definitions, so the watch judges as its report does

	mu      sync.Mutex
	start   time.Time
	n, errs int
	bad     int
	obj     []objCount
	errHeld held
	reason  string
}

// objCount counts one objective's samples.
type objCount struct {
	samples, over, wide int
	held                held
}

// held tracks since when a condition has held.
type held struct {
	on     bool
	sinceN int
	sinceT time.Time
}

var _ record.Sink = (*Watch)(nil)

// NewWatch watches records for next. planned is the step's measured
// request count when known (0 otherwise, then span is its duration).
func NewWatch(next record.Sink, crit Criteria, planned int, span time.Duration, stop func(reason string)) *Watch {
	return &Watch{next: next, crit: crit, planned: planned, span: span, stop: stop, now: time.Now, opts: AnalyzeOptions(crit.SLO),
		start: time.Now(), obj: make([]objCount, len(crit.SLO))}
}

// SetRunMeta passes meta on.
func (w *Watch) SetRunMeta(meta trace.RunMeta) { w.next.SetRunMeta(meta) }

// Reason is why the step was stopped, "" if it was not.
func (w *Watch) Reason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// Submit passes rec on, then counts it.
func (w *Watch) Submit(rec *trace.Record) {
	w.next.Submit(rec)
	if rec.Warmup {
		return
	}
	q := analyze.Derive(rec, 0, w.opts)
	w.mu.Lock()
	reason := w.observe(rec, &q)
	if reason != "" && w.reason == "" {
		w.reason = reason
	} else {
		reason = ""
	}
	w.mu.Unlock()
	if reason != "" {
		w.stop(reason)
	}
}

// observe counts one measured request and returns a stop reason or "".
func (w *Watch) observe(rec *trace.Record, q *analyze.Request) string {
	if w.reason != "" {
		return ""
	}
	w.n++
	now := w.now()
	if !q.Success {
		w.errs++
	}
	if !w.crit.SLO.good(q) {
		w.bad++
	}
	N := w.planned
	if N > 0 && float64(w.errs) > w.crit.MaxErrorRate*float64(N)+eps {
		return fmt.Sprintf("%d of at most %d measured requests failed: the error rate is above %.2f%%", w.errs, N, 100*w.crit.MaxErrorRate)
	}
	if N == 0 && w.crit.MaxErrorRate == 0 && w.errs > 0 {
		return "a request failed and the error limit is 0"
	}
	if N > 0 && w.crit.GoodputTarget > 0 && float64(w.bad) > (1-w.crit.GoodputTarget)*float64(N)+eps {
		return fmt.Sprintf("%d of at most %d measured requests missed the SLO: the goodput cannot reach %.1f%%", w.bad, N, 100*w.crit.GoodputTarget)
	}
	errWide := w.n >= MinSamples && float64(w.errs) > WideMargin*w.crit.MaxErrorRate*float64(w.n)
	if w.longEnough(&w.errHeld, errWide, now) {
		return fmt.Sprintf("the error rate %.1f%% stayed above %g x %.2f%% for a quarter of the step", 100*float64(w.errs)/float64(w.n), WideMargin, 100*w.crit.MaxErrorRate)
	}
	for i, o := range w.crit.SLO {
		c := &w.obj[i]
		th, wide := float64(o.Threshold), WideMargin*float64(o.Threshold)
		if q.Success {
			if o.Metric == MetricITL {
				for j := 1; j < len(rec.EventNs); j++ {
					g := float64(rec.EventNs[j] - rec.EventNs[j-1])
					c.samples++
					c.over += b2i(g > th)
					c.wide += b2i(g > wide)
				}
			} else if o.Metric != MetricTPOT || q.OutputTokens > 1 {
				v := requestValue(q, o.Metric)
				c.samples++
				c.over += b2i(v > th)
				c.wide += b2i(v > wide)
			}
		}
		if N > 0 && o.Metric != MetricITL && c.over >= certainFailCount(N, o.P) {
			return fmt.Sprintf("%d of at most %d %s samples exceed %v: its p%g must exceed it", c.over, N, o.Metric, o.Threshold, o.P)
		}
		broken := w.n >= MinSamples && c.samples > 0 && float64(c.wide) > (100-o.P)/100*float64(c.samples)
		if w.longEnough(&c.held, broken, now) {
			return fmt.Sprintf("the running %s p%g stayed above %g x %v for a quarter of the step", o.Metric, o.P, WideMargin, o.Threshold)
		}
	}
	return ""
}

// longEnough updates h with whether its condition holds now and reports
// whether it has held for LongEnough of the step.
func (w *Watch) longEnough(h *held, on bool, now time.Time) bool {
	if !on {
		h.on = false
		return false
	}
	if !h.on {
		*h = held{on: true, sinceN: w.n, sinceT: now}
	}
	if w.planned > 0 {
		return float64(w.n-h.sinceN) >= LongEnough*float64(w.planned)
	}
	return w.span > 0 && now.Sub(h.sinceT) >= time.Duration(LongEnough*float64(w.span))
}

// eps keeps products such as (1 - 0.9) x 60 = 5.999... from counting a
// whole request early.
const eps = 1e-9

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
