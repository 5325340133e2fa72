package analyze

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/tracekit/tracekit/trace"
)

const nsPerSec = int64(1e9)

// maxSeriesBins caps the 1 s time series (one week) so a corrupt timestamp
// cannot allocate without bound; later events are clamped into the last bin.
const maxSeriesBins = 7 * 24 * 3600

// FileInfo describes one recording that went into a Summary.
type FileInfo struct {
	Path     string        `json:"path"`
	Rows     int64         `json:"rows"`
	OffsetNs int64         `json:"offset_ns"` // added to its times to align it with the others
	Meta     trace.RunMeta `json:"run_meta"`
}

// Summary is everything analyze derives from a run. All renderers read it
// and nothing else. Throughputs are per second of Duration; latency Stats
// are in milliseconds.
type Summary struct {
	Files   []FileInfo `json:"files"`
	Options Options    `json:"-"`

	// Run description, from the metadata when present.
	Model          string  `json:"model,omitempty"`
	Tokenizer      string  `json:"tokenizer,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"` // 0: not set
	RequestRate    float64 `json:"request_rate,omitempty"`    // 0: unlimited
	Burstiness     float64 `json:"burstiness,omitempty"`
	StartWallNs    int64   `json:"start_wall_ns"`

	// Selection.
	Requests         int `json:"requests"` // requests analyzed (vLLM's num_prompts)
	ExcludedWarmup   int `json:"excluded_warmup"`
	ExcludedByWindow int `json:"excluded_by_window"`

	// Duration runs from StartNs (run start; with warm-up excluded the first
	// analyzed request's intended send; with --window its start) to EndNs,
	// when the last analyzed request ended.
	StartNs  int64   `json:"start_ns"`
	EndNs    int64   `json:"end_ns"`
	Duration float64 `json:"duration_s"`

	Completed             int     `json:"completed"`
	Failed                int     `json:"failed"`
	TotalInput            int64   `json:"total_input_tokens"`
	TotalOutput           int64   `json:"total_output_tokens"`
	RequestThroughput     float64 `json:"request_throughput"`
	GoodCompleted         int     `json:"good_completed"`
	RequestGoodput        float64 `json:"request_goodput"`
	OutputThroughput      float64 `json:"output_throughput"`
	TotalTokenThroughput  float64 `json:"total_token_throughput"`
	MaxOutputTokensPerS   float64 `json:"max_output_tokens_per_s"`
	MaxConcurrentRequests int     `json:"max_concurrent_requests"`

	// Headline statistics with vLLM's definitions (ITL per Options.ITL).
	TTFT Stats `json:"ttft"`
	TPOT Stats `json:"tpot"`
	ITL  Stats `json:"itl"`
	E2EL Stats `json:"e2el"`

	// ITL under each definition.
	ITLPerEvent    Stats `json:"itl_per_event"`
	ITLPerToken    Stats `json:"itl_per_token"`
	ITLRequestMean Stats `json:"itl_request_mean"`

	// Coordinated-omission view: latency from the intended send time,
	// queue time for a concurrency slot, and the client's send delay.
	CorrectedTTFT Stats `json:"corrected_ttft"`
	CorrectedE2EL Stats `json:"corrected_e2el"`
	Queue         Stats `json:"queue"`
	SendDelay     Stats `json:"send_delay"`

	Health []FileHealth `json:"health"`
	// Warnings say when the client may have distorted timing.
	Warnings []string `json:"warnings,omitempty"`

	Errors    []ErrorCount   `json:"errors_by_kind"`
	Cache     CacheStats     `json:"cached_tokens"`
	Turns     []TurnStats    `json:"per_turn"`
	MultiTurn MultiTurnStats `json:"multi_turn"`
	Series    Series         `json:"time_series"`

	// Approximate is true when some distribution passed MaxExactSamples and
	// its percentiles carry up to HistRelErr relative error.
	Approximate bool `json:"approximate"`

	// Reqs are the analyzed requests in file order, for the per-request file.
	Reqs []Request `json:"-"`

	dists      map[string]*Dist // by metric name, for CDFs
	eventTimes []int64          // of successful requests, nil when past the limit
}

// FileHealth is one recording's client health figures.
type FileHealth struct {
	Path string        `json:"path"`
	H    *trace.Health `json:"health"`
}

// ErrorCount counts failed requests of one kind.
type ErrorCount struct {
	Kind    string `json:"kind"`
	Count   int    `json:"count"`
	Example string `json:"example,omitempty"` // first error message seen
}

// CacheStats sums usage.prompt_tokens_details.cached_tokens over the
// successful requests that reported it.
type CacheStats struct {
	Reporting    int     `json:"requests_reporting"`
	CachedTokens int64   `json:"cached_tokens"`
	PromptTokens int64   `json:"prompt_tokens"` // of the reporting requests
	HitRatio     float64 `json:"hit_ratio"`     // CachedTokens / PromptTokens
}

// TurnStats aggregates the requests of one turn index (0-based) across
// conversations: the prefix-cache story of long conversations.
type TurnStats struct {
	Turn            int32   `json:"turn"`
	Completed       int     `json:"completed"`
	Failed          int     `json:"failed"`
	MeanTTFTms      float64 `json:"mean_ttft_ms"`
	P50TTFTms       float64 `json:"p50_ttft_ms"`
	P90TTFTms       float64 `json:"p90_ttft_ms"`
	MeanTPOTms      float64 `json:"mean_tpot_ms"`
	MeanPrompt      float64 `json:"mean_prompt_tokens"`
	MeanOutput      float64 `json:"mean_output_tokens"`
	MeanCached      float64 `json:"mean_cached_tokens"`
	CacheHitRatio   float64 `json:"cache_hit_ratio"`
	cached, prompts int64
	reporting       int
	ttfts           []float64
}

// MultiTurnStats is vLLM multi-turn benchmark's summary: pandas describe()
// of per-request figures (sample std, ddof=1), plus runtime and rate.
type MultiTurnStats struct {
	RuntimeSec     float64       `json:"runtime_sec"`
	RequestsPerSec float64       `json:"requests_per_sec"`
	Columns        []string      `json:"columns"` // percentile column names, e.g. "25%"
	Rows           []DescribeRow `json:"rows"`
}

// DescribeRow is one row of a pandas describe() table.
type DescribeRow struct {
	Name   string    `json:"name"`
	Count  int       `json:"count"`
	Mean   float64   `json:"mean"`
	Std    float64   `json:"std"`
	Min    float64   `json:"min"`
	Pcts   []float64 `json:"percentiles"`
	Max    float64   `json:"max"`
	values []float64
}

// Series are 1 s bins from the run start (bin i covers [i s, (i+1) s)).
type Series struct {
	OutputTokens []float64 `json:"output_tokens_per_s"` // tokens of events in the bin
	Messages     []float64 `json:"messages_per_s"`      // events in the bin (vLLM's peak counts these)
	Completed    []float64 `json:"completed_per_s"`     // successful requests ending in the bin
	Errors       []float64 `json:"errors_per_s"`        // failed requests ending in the bin
	Concurrency  []float64 `json:"concurrency"`         // time-averaged requests in flight
	TTFTMeanMs   []float64 `json:"ttft_mean_ms"`        // of successful requests sent in the bin, NaN-free (0 when none)
	E2ELMeanMs   []float64 `json:"e2el_mean_ms"`
	E2ELMaxMs    []float64 `json:"e2el_max_ms"`
}

// accumulator is the single pass: Add each record, then finish.
type accumulator struct {
	opts  Options
	reqs  []Request
	dists map[string]*Dist
	// eventTimes holds the event times of successful requests for vLLM's
	// peak-throughput bins; past the limit msBins (1 ms counts) take over.
	eventTimes []int64
	msBins     []int32
	tokBins    []float64 // output tokens per 1 s bin
	msgBins    []float64
	sawWarmup  int
	outWindow  int
	errMsg     map[string]string
	// expectRows is the number of rows the caller will add (0: unknown);
	// after the first rows it sizes the per-event slices once, instead of
	// letting append copy them at every doubling.
	expectRows, seenRows, seenEvents int
	presized                         bool
	// reserved, when set, waits for reserve's allocations and installs them.
	reserved func()
}

func newAccumulator(opts Options) *accumulator {
	opts = opts.withDefaults()
	a := &accumulator{opts: opts, dists: map[string]*Dist{}, errMsg: map[string]string{}}
	for _, m := range []string{"ttft", "tpot", "e2el", "itl", "itl_per_token", "itl_request_mean",
		"corrected_ttft", "corrected_e2el", "queue", "send_delay"} {
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
	if !a.opts.Window.contains(r.SentNs) {
		a.outWindow++
		return
	}
	q := Derive(r, file)
	a.reqs = append(a.reqs, q)
	if !q.Success {
		if _, ok := a.errMsg[q.ErrorKind]; !ok {
			a.errMsg[q.ErrorKind] = r.ErrorMessage
		}
		return
	}
	d := a.dists
	d["ttft"].Add(float64(q.TTFTNs))
	d["e2el"].Add(float64(q.E2ELNs))
	if q.OutputTokens > 1 {
		d["tpot"].Add(q.TPOTNs)
		d["itl_request_mean"].Add(q.ITLMeanNs)
	}
	a.reqs[len(a.reqs)-1].evOff = len(a.eventTimes)
	d["corrected_ttft"].Add(float64(q.CorrectedTTFTNs))
	d["corrected_e2el"].Add(float64(q.CorrectedE2ELNs))
	d["queue"].Add(float64(q.QueueNs))
	d["send_delay"].Add(float64(q.SendDelayNs))
	a.addEvents(r.EventNs, r.EventTokens)
}

// addEvents is the per-event hot loop: ITL samples, time bins and the
// event times for the peak bins. While the distributions are exact it
// appends straight into their sample slices.
func (a *accumulator) addEvents(ts []int64, toks []int32) {
	if len(ts) == 0 {
		return
	}
	perEvent, perToken := a.dists["itl"], a.dists["itl_per_token"]
	if last := int(min(max(ts[len(ts)-1]/nsPerSec, 0), maxSeriesBins-1)); last >= len(a.tokBins) {
		a.tokBins = grow(a.tokBins, last)
		a.msgBins = grow(a.msgBins, last)
	}
	fast := perEvent.hist == nil && perToken.hist == nil &&
		len(perEvent.samples)+len(ts) <= perEvent.limit && len(perToken.samples)+len(ts) <= perToken.limit
	pe, pt := perEvent.samples, perToken.samples
	carry := int64(0) // gap time of zero-token events, handed to the next token
	for i, t := range ts {
		if i > 0 {
			gap := t - ts[i-1]
			tokGap := -1.0
			if toks[i] > 0 {
				tokGap = float64(gap+carry) / float64(toks[i])
				carry = 0
			} else {
				carry += gap
			}
			switch {
			case fast:
				pe = append(pe, float64(gap))
				if tokGap >= 0 {
					pt = append(pt, tokGap)
				}
			default:
				perEvent.Add(float64(gap))
				if tokGap >= 0 {
					perToken.Add(tokGap)
				}
			}
		}
		b := int(min(max(t/nsPerSec, 0), maxSeriesBins-1))
		a.tokBins[b] += float64(toks[i])
		a.msgBins[b]++
	}
	if fast {
		perEvent.samples, perToken.samples = pe, pt
		perEvent.sorted, perToken.sorted = false, false
	}
	if a.msBins == nil && len(a.eventTimes)+len(ts) <= a.opts.MaxExactSamples {
		a.eventTimes = append(a.eventTimes, ts...)
		return
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
}

// presize grows the per-event slices to the expected event count (plus 5%),
// estimated from the rows seen so far, within MaxExactSamples.
func (a *accumulator) presize() {
	a.presized = true
	want := min(int(float64(a.seenEvents)/float64(a.seenRows)*float64(a.expectRows)*1.05), a.opts.MaxExactSamples)
	for _, d := range []*Dist{a.dists["itl"], a.dists["itl_per_token"]} {
		d.samples = slices.Grow(d.samples, want-len(d.samples))
	}
	a.eventTimes = slices.Grow(a.eventTimes, want-len(a.eventTimes))
	a.reqs = slices.Grow(a.reqs, a.expectRows-len(a.reqs))
}

// reserve is presize for a known event count (an upper bound, from the
// files' footers) and expectRows, made before the first row: the slices are
// allocated (and zeroed) on another goroutine while the first rows decode;
// the first add waits for them.
func (a *accumulator) reserve(events int) {
	a.presized = true
	want, rows := min(events, a.opts.MaxExactSamples), a.expectRows
	var (
		pe, pt []float64
		et     []int64
		reqs   []Request
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		pe, pt, et = make([]float64, 0, want), make([]float64, 0, want), make([]int64, 0, want)
		reqs = make([]Request, 0, rows)
	}()
	a.reserved = func() {
		<-done
		a.reserved = nil
		a.dists["itl"].samples, a.dists["itl_per_token"].samples = pe, pt
		a.eventTimes, a.reqs = et, reqs
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

// finish computes the aggregates.
func (a *accumulator) finish(files []FileInfo) *Summary {
	if a.reserved != nil { // no row was added
		a.reserved()
	}
	s := &Summary{Files: files, Options: a.opts, Reqs: a.reqs, dists: a.dists, eventTimes: a.eventTimes,
		ExcludedWarmup: a.sawWarmup, ExcludedByWindow: a.outWindow, Requests: len(a.reqs)}
	s.describeRun()
	s.span(a.sawWarmup > 0)
	var succ []*Request
	for i := range a.reqs {
		q := &a.reqs[i]
		if !q.Success {
			s.Failed++
			continue
		}
		succ = append(succ, q)
		s.Completed++
		s.TotalInput += int64(q.PromptTokens)
		s.TotalOutput += int64(q.OutputTokens)
		if s.Options.Goodput.good(q) {
			s.GoodCompleted++
		}
	}
	if s.Duration > 0 {
		s.RequestThroughput = float64(s.Completed) / s.Duration
		s.RequestGoodput = float64(s.GoodCompleted) / s.Duration
		s.OutputThroughput = float64(s.TotalOutput) / s.Duration
		s.TotalTokenThroughput = float64(s.TotalInput+s.TotalOutput) / s.Duration
	}
	// The per-event distributions' statistics are the largest piece of
	// work: they run on their own goroutines while the rest is computed.
	var wg sync.WaitGroup
	s.stats(&wg)
	s.MaxOutputTokensPerS = a.peakOutput(succ)
	s.MaxConcurrentRequests = peakConcurrency(succ)
	s.errors(a.errMsg)
	s.cacheAndTurns()
	s.multiTurn(succ)
	s.series(a.tokBins, a.msgBins)
	s.health()
	wg.Wait()
	s.ITL = [...]Stats{s.ITLPerEvent, s.ITLPerToken, s.ITLRequestMean}[s.Options.ITL]
	return s
}

// span sets StartNs, EndNs and Duration (vLLM's benchmark duration).
func (s *Summary) span(warmupExcluded bool) {
	switch {
	case !s.Options.Window.IsZero():
		s.StartNs = s.Options.Window.FromNs
	case warmupExcluded && len(s.Reqs) > 0:
		s.StartNs = s.Reqs[0].IntendedNs
		for i := range s.Reqs {
			s.StartNs = min(s.StartNs, s.Reqs[i].IntendedNs)
		}
	}
	s.EndNs = s.StartNs
	for i := range s.Reqs {
		s.EndNs = max(s.EndNs, s.Reqs[i].endNs())
	}
	s.Duration = float64(s.EndNs-s.StartNs) / 1e9
}

// good is vLLM's goodput test: every set SLO holds (value <= SLO); TPOT of
// a request with output_len <= 1 counts as 0.
func (o SLO) good(q *Request) bool {
	const ms = 1e6
	return (o.TTFTms == 0 || float64(q.TTFTNs) <= o.TTFTms*ms) &&
		(o.TPOTms == 0 || q.TPOTNs <= o.TPOTms*ms) &&
		(o.E2ELms == 0 || float64(q.E2ELNs) <= o.E2ELms*ms)
}

// peakOutput is vLLM's peak output throughput: the events of successful
// requests (the first at start+TTFT, then one per later message) counted in
// 1 s bins from the earliest successful start; the fullest bin.
func (a *accumulator) peakOutput(succ []*Request) float64 {
	if len(succ) == 0 {
		return 0
	}
	m := succ[0].SentNs
	for _, q := range succ {
		m = min(m, q.SentNs)
	}
	var counts []int64 // 1 s bins from m
	var best int64
	bump := func(b, n int64) {
		b = min(b, maxSeriesBins-1)
		if b >= int64(len(counts)) {
			counts = append(counts, make([]int64, b+1-int64(len(counts)))...)
		}
		counts[b] += n
		best = max(best, counts[b])
	}
	if a.msBins == nil {
		// Each request's events are sorted (validate checks): count a
		// bin's share of them with two binary searches, not one division
		// per event.
		for _, q := range succ {
			ts := a.eventTimes[q.evOff : q.evOff+int(q.Events)]
			i, _ := slices.BinarySearch(ts, m)
			for i < len(ts) {
				b := (ts[i] - m) / nsPerSec
				if b >= maxSeriesBins-1 { // the rest is clamped into the last bin
					bump(b, int64(len(ts)-i))
					break
				}
				j, _ := slices.BinarySearch(ts[i:], m+(b+1)*nsPerSec)
				bump(b, int64(j))
				i += j
			}
		}
		return float64(best)
	}
	// Approximate: 1 ms counts re-binned from m rounded down to 1 ms.
	m0 := m / 1e6
	for ms, n := range a.msBins {
		if int64(ms) >= m0 && n > 0 {
			bump((int64(ms)-m0)/1000, int64(n))
		}
	}
	return float64(best)
}

// peakConcurrency is vLLM's peak concurrent requests: an exact sweep over
// the intervals [start, start+E2EL) of successful requests, departures
// before arrivals at equal times.
func peakConcurrency(succ []*Request) int {
	starts := make([]int64, len(succ))
	ends := make([]int64, len(succ))
	for i, q := range succ {
		starts[i], ends[i] = q.SentNs, q.SentNs+q.E2ELNs
	}
	slices.Sort(starts)
	slices.Sort(ends)
	cur, best, j := 0, 0, 0
	for _, st := range starts {
		for j < len(ends) && ends[j] <= st {
			cur--
			j++
		}
		cur++
		best = max(best, cur)
	}
	return best
}

// stats computes every distribution's statistics; the distributions are
// independent, so the large per-event ones run on their own goroutines,
// added to wg: s.ITL is set by the caller once wg is done.
func (s *Summary) stats(wg *sync.WaitGroup) {
	ps := s.Options.Percentiles
	targets := map[string]*Stats{
		"ttft": &s.TTFT, "tpot": &s.TPOT, "e2el": &s.E2EL,
		"itl": &s.ITLPerEvent, "itl_per_token": &s.ITLPerToken, "itl_request_mean": &s.ITLRequestMean,
		"corrected_ttft": &s.CorrectedTTFT, "corrected_e2el": &s.CorrectedE2EL,
		"queue": &s.Queue, "send_delay": &s.SendDelay,
	}
	for name, dst := range targets {
		d := s.dists[name]
		if name == "itl" || name == "itl_per_token" {
			wg.Go(func() { *dst = d.Stats(ps) })
			continue
		}
		*dst = d.Stats(ps)
	}
	for _, x := range s.dists {
		s.Approximate = s.Approximate || x.Approximate()
	}
}

// itlDist is the distribution behind the headline ITL.
func (s *Summary) itlDist() *Dist {
	return s.dists[[...]string{"itl", "itl_per_token", "itl_request_mean"}[s.Options.ITL]]
}

func (s *Summary) errors(examples map[string]string) {
	counts := map[string]int{}
	for i := range s.Reqs {
		if !s.Reqs[i].Success {
			counts[s.Reqs[i].ErrorKind]++
		}
	}
	for k, n := range counts {
		s.Errors = append(s.Errors, ErrorCount{Kind: k, Count: n, Example: examples[k]})
	}
	slices.SortFunc(s.Errors, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Kind, b.Kind))
	})
}

func (s *Summary) cacheAndTurns() {
	byTurn := map[int32]*TurnStats{}
	for i := range s.Reqs {
		q := &s.Reqs[i]
		t := byTurn[q.Turn]
		if t == nil {
			t = &TurnStats{Turn: q.Turn}
			byTurn[q.Turn] = t
		}
		if !q.Success {
			t.Failed++
			continue
		}
		t.Completed++
		t.ttfts = append(t.ttfts, float64(q.TTFTNs)/1e6)
		t.MeanTPOTms += q.TPOTNs / 1e6
		t.MeanPrompt += float64(q.PromptTokens)
		t.MeanOutput += float64(q.OutputTokens)
		if q.CachedTokens >= 0 {
			t.reporting++
			t.cached += int64(q.CachedTokens)
			t.prompts += int64(q.PromptTokens)
			s.Cache.Reporting++
			s.Cache.CachedTokens += int64(q.CachedTokens)
			s.Cache.PromptTokens += int64(q.PromptTokens)
		}
	}
	s.Cache.HitRatio = ratio(float64(s.Cache.CachedTokens), float64(s.Cache.PromptTokens))
	for _, t := range byTurn {
		n := float64(t.Completed)
		slices.Sort(t.ttfts)
		t.MeanTTFTms = ratio(sum(t.ttfts), n)
		t.P50TTFTms, t.P90TTFTms = Percentile(t.ttfts, 50), Percentile(t.ttfts, 90)
		t.MeanTPOTms, t.MeanPrompt, t.MeanOutput = ratio(t.MeanTPOTms, n), ratio(t.MeanPrompt, n), ratio(t.MeanOutput, n)
		t.MeanCached = ratio(float64(t.cached), float64(t.reporting))
		t.CacheHitRatio = ratio(float64(t.cached), float64(t.prompts))
		t.ttfts = nil
		s.Turns = append(s.Turns, *t)
	}
	slices.SortFunc(s.Turns, func(a, b TurnStats) int { return cmp.Compare(a.Turn, b.Turn) })
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// multiTurn builds vLLM multi-turn's statistics table over successful
// requests. input_num_turns counts the messages sent (user and assistant,
// system excluded): 2*turn+1.
func (s *Summary) multiTurn(succ []*Request) {
	rows := []DescribeRow{{Name: "ttft_ms"}, {Name: "tpot_ms"}, {Name: "latency_ms"},
		{Name: "input_num_turns"}, {Name: "input_num_tokens"}, {Name: "output_num_tokens"}, {Name: "output_num_chunks"}}
	for _, q := range succ {
		rows[0].values = append(rows[0].values, float64(q.TTFTNs)/1e6)
		if q.OutputTokens > 1 {
			rows[1].values = append(rows[1].values, q.TPOTNs/1e6)
		}
		rows[2].values = append(rows[2].values, float64(q.E2ELNs)/1e6)
		rows[3].values = append(rows[3].values, float64(2*q.Turn+1))
		rows[4].values = append(rows[4].values, float64(q.PromptTokens))
		rows[5].values = append(rows[5].values, float64(q.OutputTokens))
		rows[6].values = append(rows[6].values, float64(q.Events))
	}
	ps := []float64{25, 50, 75, 90}
	cols := []string{"25%", "50%", "75%", "90%"}
	if len(succ) >= 100 {
		ps, cols = append(ps, 99), append(cols, "99%")
	}
	if len(succ) >= 1000 {
		ps, cols = append(ps, 99.9), append(cols, "99.9%")
	}
	s.MultiTurn = MultiTurnStats{RuntimeSec: s.Duration, Columns: cols,
		RequestsPerSec: ratio(float64(len(succ)), s.Duration)}
	for _, r := range rows {
		s.MultiTurn.Rows = append(s.MultiTurn.Rows, describe(r.Name, r.values, ps))
	}
}

// describe is pandas' describe(): count, mean, sample std (ddof=1; NaN
// shown as 0 for one value), min, linear percentiles, max.
func describe(name string, v []float64, ps []float64) DescribeRow {
	slices.Sort(v)
	r := DescribeRow{Name: name, Count: len(v), Pcts: make([]float64, len(ps))}
	if len(v) == 0 {
		return r
	}
	r.Mean = sum(v) / float64(len(v))
	if len(v) > 1 {
		var ss float64
		for _, x := range v {
			ss += (x - r.Mean) * (x - r.Mean)
		}
		r.Std = math.Sqrt(ss / float64(len(v)-1))
	}
	r.Min, r.Max = v[0], v[len(v)-1]
	for i, p := range ps {
		r.Pcts[i] = Percentile(v, p)
	}
	return r
}

// series fills the 1 s time series.
func (s *Summary) series(tok, msg []float64) {
	n := len(tok)
	for i := range s.Reqs {
		n = max(n, int(min(s.Reqs[i].endNs()/nsPerSec, maxSeriesBins-1))+1)
	}
	se := &s.Series
	se.OutputTokens = append(tok, make([]float64, n-len(tok))...)
	se.Messages = append(msg, make([]float64, n-len(msg))...)
	se.Completed, se.Errors, se.Concurrency = make([]float64, n), make([]float64, n), make([]float64, n)
	se.TTFTMeanMs, se.E2ELMeanMs, se.E2ELMaxMs = make([]float64, n), make([]float64, n), make([]float64, n)
	sent := make([]float64, n)
	bin := func(t int64) int { return int(min(max(t/nsPerSec, 0), int64(n-1))) }
	for i := range s.Reqs {
		q := &s.Reqs[i]
		end := q.endNs()
		// Time-weighted concurrency: add the overlap of [SentNs, end) with each bin.
		for b := bin(q.SentNs); b <= bin(end) && end > q.SentNs; b++ {
			lo, hi := max(q.SentNs, int64(b)*nsPerSec), min(end, int64(b+1)*nsPerSec)
			if hi > lo {
				se.Concurrency[b] += float64(hi-lo) / 1e9
			}
		}
		if !q.Success {
			se.Errors[bin(end)]++
			continue
		}
		se.Completed[bin(end)]++
		b := bin(q.SentNs)
		sent[b]++
		se.TTFTMeanMs[b] += float64(q.TTFTNs) / 1e6
		e := float64(q.E2ELNs) / 1e6
		se.E2ELMeanMs[b] += e
		se.E2ELMaxMs[b] = max(se.E2ELMaxMs[b], e)
	}
	for b := range sent {
		se.TTFTMeanMs[b] = ratio(se.TTFTMeanMs[b], sent[b])
		se.E2ELMeanMs[b] = ratio(se.E2ELMeanMs[b], sent[b])
	}
}

// warnSendDelayNs is the p99 send delay (sent - slot, measured from the
// records, which the client's own health figures do not cover) above which
// the client was late sending.
const warnSendDelayNs = 5e6

func (s *Summary) health() {
	for _, f := range s.Files {
		h := f.Meta.Health
		if h == nil {
			continue
		}
		s.Health = append(s.Health, FileHealth{Path: f.Path, H: h})
		for _, w := range h.Assess() { // one verdict per cause, whatever the file stored
			s.Warnings = append(s.Warnings, f.Path+": "+w)
		}
	}
	if s.Completed > 0 {
		if p99 := s.dists["send_delay"].Quantile(99); p99 > warnSendDelayNs {
			s.Warnings = append(s.Warnings, "recorded send delay (sent - slot) p99 "+fmtMs(int64(p99))+" > 5 ms: the client was late sending")
		}
	}
}
