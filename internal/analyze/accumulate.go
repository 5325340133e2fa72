package analyze

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tracekit/tracekit/internal/hugepage"
	"github.com/tracekit/tracekit/trace"
)

// accumulator is the single pass: Add each record, then finish.
type accumulator struct {
	opts  Options
	reqs  []Request
	dists map[string]*Dist
	// eventTimes holds the event times of successful requests for vLLM's
	// peak-throughput bins; past the limit msBins (1 ms counts) take over.
	eventTimes []int64
	// failTimes holds the event times of failed requests that streamed
	// some (vLLM keeps their partial TTFT and ITL in its detailed lists),
	// up to MaxExactSamples.
	failTimes []int64
	msBins    []int32
	tokBins   []float64 // output tokens per 1 s bin
	msgBins   []float64
	sawWarmup int
	outWindow int
	// sentFrom and sentTo span the send times of the requests the window
	// chose from, to say where the run was when it chose none.
	sentFrom, sentTo int64
	errMsg           map[string]string
	// expectRows is the number of rows the caller will add (0: unknown);
	// after the first rows it sizes the per-event slices once, instead of
	// letting append copy them at every doubling.
	expectRows, seenRows, seenEvents int
	presized                         bool
	// reserved, when set, waits for reserve's allocations and installs them.
	reserved func()
	// files says how to read each input file's rows (endpoints.go).
	files []fileDefaults
	// epITL holds each generating endpoint's per-event and per-token ITL
	// (in that order); the first endpoint seen fills the run's own
	// distributions, so a run of one endpoint keeps one copy (endpoints.go).
	epITL   map[string][2]*Dist
	firstEP string
	// eventTokens counts decode events by their tokens (event_tokens.go).
	eventTokens eventTokenCounts
}

func newAccumulator(opts Options) *accumulator {
	opts = opts.withDefaults()
	a := &accumulator{opts: opts, dists: map[string]*Dist{}, errMsg: map[string]string{}, epITL: map[string][2]*Dist{}}
	for _, m := range []string{"ttft", "tpot", "e2el", "itl", "itl_per_token", "itl_request_mean", "itl_first_content",
		"corrected_ttft", "corrected_e2el", "queue", "send_delay", "decode_itl"} {
		a.dists[m] = newDist(opts.MaxExactSamples)
	}
	return a
}

// add folds one aligned record into the accumulator.
func (a *accumulator) add(r *trace.Record, file int) {
	if a.reserved != nil {
		a.reserved()
	}
	a.seenRows++
	a.seenEvents += len(r.EventNs)
	if !a.presized && a.expectRows > 0 && a.seenRows == min(256, a.expectRows) {
		a.presize()
	}
	if r.Warmup && !a.opts.IncludeWarmup {
		a.sawWarmup++
		return
	}
	if a.outWindow+len(a.reqs) == 0 || r.SentNs < a.sentFrom {
		a.sentFrom = r.SentNs
	}
	a.sentTo = max(a.sentTo, r.SentNs)
	if !a.opts.Window.contains(r.SentNs) {
		a.outWindow++
		return
	}
	a.files[file].apply(r)
	q := Derive(r, file, a.opts)
	q.gapOff = -1
	a.reqs = append(a.reqs, q)
	if !q.Success {
		if _, ok := a.errMsg[q.ErrorKind]; !ok {
			a.errMsg[q.ErrorKind] = r.ErrorMessage
		}
		if len(r.EventNs) > 0 && len(a.failTimes)+len(r.EventNs) <= a.opts.MaxExactSamples {
			a.reqs[len(a.reqs)-1].evOff = len(a.failTimes)
			a.failTimes = append(a.failTimes, r.EventNs...)
		} else {
			a.reqs[len(a.reqs)-1].evOff = -1
		}
		return
	}
	d := a.dists
	d["e2el"].Add(float64(q.E2ELNs))
	d["corrected_e2el"].Add(float64(q.CorrectedE2ELNs))
	d["queue"].Add(float64(q.QueueNs))
	d["send_delay"].Add(float64(q.SendDelayNs))
	if q.NonStreaming {
		// The body's tokens count where it arrived; it has no TTFT, no
		// gaps and no stream messages for the peak bins. (A non-generating
		// answer may have no event and has no output tokens.)
		if len(r.EventNs) > 0 {
			a.addTokens(r.EventNs[0], q.OutputTokens)
		}
		return
	}
	d["ttft"].Add(float64(q.TTFTNs))
	if q.OutputTokens > 1 {
		d["tpot"].Add(q.TPOTNs)
		d["itl_request_mean"].Add(q.ITLMeanNs)
		if q.ContentEvents > 0 {
			d["itl_first_content"].Add(q.ITLContentNs)
		}
	}
	a.reqs[len(a.reqs)-1].evOff = len(a.eventTimes)
	d["corrected_ttft"].Add(float64(q.CorrectedTTFTNs))
	itl := a.endpointITL(q.Endpoint)
	off := a.addEvents(r.EventNs, r.EventTokens, r.TokensExact, itl[0], itl[1], d["decode_itl"])
	if itl[0] != d["itl"] {
		off = -1
	}
	a.reqs[len(a.reqs)-1].gapOff = off
}

// emptyWindow is the error of a --window that selected no request of the
// ones it chose from, naming the run's span; nil otherwise.
func (a *accumulator) emptyWindow() error {
	if a.opts.Window.IsZero() || len(a.reqs) > 0 || a.outWindow == 0 {
		return nil
	}
	return fmt.Errorf("--window %s selects no request: the run spans %s-%s (the requests' send times): %w",
		a.opts.Window.flag(), seconds(a.sentFrom), seconds(a.sentTo), ErrBadInput)
}

// seconds formats ns as seconds to a tenth: "0s", "42.1s".
func seconds(ns int64) string {
	return strconv.FormatFloat(math.Round(float64(ns)/1e8)/10, 'f', -1, 64) + "s"
}

// addTokens counts n output tokens at time t in the 1 s token bins.
func (a *accumulator) addTokens(t int64, n int32) {
	b := int(min(max(t/nsPerSec, 0), maxSeriesBins-1))
	if b >= len(a.tokBins) {
		a.tokBins = grow(a.tokBins, b)
		a.msgBins = grow(a.msgBins, b)
	}
	a.tokBins[b] += float64(n)
}

// addEvents is the per-event work of a successful stream: ITL samples
// (into the request's endpoint's perEvent and perToken, and the decode-only
// gaps into decode), time bins, tokens per event and the event times for
// the peak bins. While the distributions are exact it writes straight into
// their sample slices: the per-event gaps once, which the per-token ITL
// (one token each) and the decode-only ITL (less the first) share. It
// returns where in perEvent's samples the stream's gaps went, -1 when not
// there as such (not written directly, none, or the events unsorted).
func (a *accumulator) addEvents(ts []int64, toks []int32, exact bool, perEvent, perToken, decode *Dist) int {
	if len(ts) == 0 {
		return -1
	}
	a.addBins(ts, toks)
	ones := oneTokenEach(toks)
	a.eventTokens.add(toks, exact, ones)
	n := len(ts)
	fast := perEvent.hist == nil && perToken.hist == nil &&
		len(perEvent.samples)+n <= perEvent.limit && len(perToken.samples)+n <= perToken.limit
	if perToken.twin != nil && (!fast || !ones) {
		perToken.untwin()
	}
	if !fast { // perEvent may move to its histogram: decode cannot view it
		decode.materialize()
	}
	off := len(perEvent.samples) // where this stream's gaps go when fast
	sorted := true
	switch {
	case perToken.twin != nil: // the per-token gaps are the per-event ones
		sorted = perEvent.appendGaps(ts)
	case fast:
		sorted = perEvent.appendGaps(ts)
		pt := perToken.samples
		carry := int64(0) // gap time of zero-token events, handed to the next token
		for i := 1; i < n; i++ {
			gap := ts[i] - ts[i-1]
			if toks[i] > 0 {
				pt = append(pt, float64(gap+carry)/float64(toks[i]))
				carry = 0
			} else {
				carry += gap
			}
		}
		perToken.samples = pt
		perToken.sorted = false
	default:
		carry := int64(0)
		for i := 1; i < n; i++ {
			gap := ts[i] - ts[i-1]
			perEvent.Add(float64(gap))
			if toks[i] > 0 {
				perToken.Add(float64(gap+carry) / float64(toks[i]))
				carry = 0
			} else {
				carry += gap
			}
		}
	}
	// The decode-only gaps are this stream's per-event gaps less the
	// first: viewed where they were just written.
	if n > 2 && !(fast && decode.addSpan(perEvent, off+1, off+n-1)) {
		decode.addGaps(ts, 2)
	}
	if !fast || !sorted {
		off = -1
	}
	if a.msBins == nil && len(a.eventTimes)+n <= a.opts.MaxExactSamples {
		a.eventTimes = append(a.eventTimes, ts...)
		return off
	}
	if a.msBins == nil { // switch to 1 ms counts
		a.msBins = []int32{}
		for _, t := range a.eventTimes {
			a.addMs(t)
		}
		a.eventTimes = nil
	}
	for _, t := range ts {
		a.addMs(t)
	}
	return off
}

// addBins counts the events (messages) and their tokens in the 1 s bins.
// The times are sorted (validate checks), so it walks them bin by bin,
// adding each bin's run of events once, rather than dividing every time.
// The counts are whole numbers, so the sums are the per-event ones exactly.
func (a *accumulator) addBins(ts []int64, toks []int32) {
	for i := 0; i < len(ts); {
		b := int(min(max(ts[i]/nsPerSec, 0), maxSeriesBins-1))
		if b >= len(a.tokBins) {
			a.tokBins = grow(a.tokBins, b)
			a.msgBins = grow(a.msgBins, b)
		}
		// Bin b holds [lo, hi); the first and last bins take what is clamped.
		lo, hi := int64(b)*nsPerSec, int64(b+1)*nsPerSec
		if b == 0 {
			lo = math.MinInt64
		}
		if b == maxSeriesBins-1 {
			hi = math.MaxInt64
		}
		var tok int64
		j := i
		for ; j < len(ts) && ts[j] >= lo && ts[j] < hi; j++ {
			tok += int64(toks[j])
		}
		a.tokBins[b] += float64(tok)
		a.msgBins[b] += float64(j - i)
		i = j
	}
}

// oneTokenEach reports whether every event after the first carried one
// token: then each per-token gap is the per-event gap, exactly.
func oneTokenEach(toks []int32) bool {
	for _, n := range toks[min(1, len(toks)):] {
		if n != 1 {
			return false
		}
	}
	return true
}

// presize grows the per-event slices to the expected event count (plus 5%),
// estimated from the rows seen so far, within MaxExactSamples.
func (a *accumulator) presize() {
	a.presized = true
	want := min(int(float64(a.seenEvents)/float64(a.seenRows)*float64(a.expectRows)*1.05), a.opts.MaxExactSamples)
	// Not itl_per_token: it shares itl's samples until an event carries
	// other than one token, and then takes itl's room (Dist.untwin); not
	// decode_itl, which views them (Dist.addSpan).
	d := a.dists["itl"]
	d.samples = slices.Grow(d.samples, want-len(d.samples))
	a.eventTimes = slices.Grow(a.eventTimes, want-len(a.eventTimes))
	a.reqs = slices.Grow(a.reqs, a.expectRows-len(a.reqs))
}

// reserve is presize for a known event count (an upper bound, from the
// files' footers) and expectRows, made before the first row: the slices are
// allocated, and their pages touched, on another goroutine while the first
// rows decode; the first add waits for them.
func (a *accumulator) reserve(events int) {
	a.presized = true
	want, rows := min(events, a.opts.MaxExactSamples), a.expectRows
	var (
		pe   []float64
		et   []int64
		reqs []Request
		done = make(chan struct{})
	)
	go func() { // itl_per_token and decode_itl: see presize
		defer close(done)
		pe, et = hugepage.Grow([]float64(nil), want), hugepage.Grow([]int64(nil), want)
		reqs = make([]Request, 0, rows)
		prefault(pe[:cap(pe)])
		prefault(et[:cap(et)])
	}()
	a.reserved = func() {
		<-done
		a.reserved = nil
		a.dists["itl"].samples = pe
		a.eventTimes, a.reqs = et, reqs
	}
}

// prefault writes a zero to every 4 KiB page of s. Memory fresh from the
// system is mapped on its first write, and that fault costs far more than
// the write: taken here, on the goroutine that reserves, the per-event loop
// later writes to pages already there.
func prefault[T float64 | int64](s []T) {
	for i := 0; i < len(s); i += 4096 / 8 {
		s[i] = 0
	}
}

func (a *accumulator) addMs(t int64) {
	b := int(min(max(t/1e6, 0), maxSeriesBins*1000-1))
	if b >= len(a.msBins) {
		a.msBins = append(a.msBins, make([]int32, b+1-len(a.msBins))...)
	}
	a.msBins[b]++
}

func grow(s []float64, i int) []float64 {
	return append(s, make([]float64, i+1-len(s))...)
}
