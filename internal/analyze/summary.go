package analyze

import (
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

	Completed    int `json:"completed"`
	NonStreaming int `json:"non_streaming_completed"` // of Completed: E2EL and tokens only
	// Truncated counts the analyzed streams that ended without
	// data: [DONE]; TruncatedCompleted those of them counted as completed
	// (vLLM's rule: the body ended cleanly after at least one event).
	Truncated          int `json:"truncated"`
	TruncatedCompleted int `json:"truncated_completed"`
	// Failed counts the analyzed requests that were sent and failed; like
	// Completed (and vLLM's block, which counts the requests it sent) it
	// leaves out NotSent: graph nodes recorded parent_failed, never sent;
	// and CanceledByClient: requests replay canceled on purpose
	// (--cancel-rate), not the server's failures.
	// Requests = Completed + Failed + NotSent + CanceledByClient.
	Failed                int     `json:"failed"`
	NotSent               int     `json:"not_sent"`
	CanceledByClient      int     `json:"canceled_by_client"`
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
	ITLPerEvent     Stats `json:"itl_per_event"`
	ITLPerToken     Stats `json:"itl_per_token"`
	ITLRequestMean  Stats `json:"itl_request_mean"`
	ITLFirstContent Stats `json:"itl_first_content"`

	// Coordinated-omission view: latency from the intended send time,
	// queue time for a concurrency slot, and the client's send delay.
	CorrectedTTFT Stats `json:"corrected_ttft"`
	CorrectedE2EL Stats `json:"corrected_e2el"`
	Queue         Stats `json:"queue"`
	SendDelay     Stats `json:"send_delay"`

	Health []FileHealth `json:"health"`
	// Warnings say when the client may have distorted timing.
	Warnings []string `json:"warnings,omitempty"`
	// Clocks is how the merged shards' clocks agreed (shards.go); nil for
	// one recording.
	Clocks *ShardClocks `json:"shard_clocks,omitempty"`

	// Endpoints are each endpoint's figures (endpoints.go); the reports
	// show them when ShowEndpoints.
	Endpoints EndpointList `json:"endpoints"`

	// Figures are the per-request figures beside vLLM's block (figures.go).
	Figures RequestFigures `json:"per_request"`
	// TokensPerEvent is the stream's tokens per decode event
	// (event_tokens.go); nil without a decode event.
	TokensPerEvent *EventTokens `json:"tokens_per_event,omitempty"`

	Errors    []ErrorCount   `json:"errors_by_kind"`
	Cache     CacheStats     `json:"cached_tokens"`
	Turns     []TurnStats    `json:"per_turn"`
	MultiTurn MultiTurnStats `json:"multi_turn"`
	// Models are each model's figures when the requests named more than
	// one (models.go); nil otherwise.
	Models map[string]*ModelStats `json:"models,omitempty"`
	// Steady is the run's steady window and its figures (steady.go); nil
	// when no request succeeded.
	Steady *SteadyState `json:"steady_state,omitempty"`
	// Slices are the run cut into Options.Slices-long windows (slices.go).
	Slices []WindowFigures `json:"slices,omitempty"`
	// Sessions are the session metrics of graph conversations
	// (session.go); nil when no request has parents.
	Sessions *SessionStats `json:"sessions,omitempty"`
	// Media are the media figures (media.go); nil when no request sent
	// media, so a text run's JSON keys are as before.
	Media  *MediaStats `json:"media,omitempty"`
	Series Series      `json:"time_series"`
	// Server is what the servers' /metrics said (server.go); nil without a sidecar.
	Server *ServerReport `json:"server,omitempty"`

	// Approximate is true when some distribution passed MaxExactSamples and
	// its percentiles carry up to HistRelErr relative error.
	Approximate bool `json:"approximate"`

	// Reqs are the analyzed requests in file order, for the per-request file.
	Reqs []Request `json:"-"`

	dists      map[string]*Dist // by metric name, for CDFs
	eventTimes []int64          // of successful requests, nil when past the limit
	failTimes  []int64          // of failed requests, see accumulator
	reasoned   bool             // a completed stream's tokens began before its answer (or it had none): see ShowEndpoints
}

// finish computes the aggregates.
func (a *accumulator) finish(files []FileInfo) *Summary {
	if a.reserved != nil { // no row was added
		a.reserved()
	}
	a.settleTwins()
	if len(a.epITL) > 1 { // merging adds to the per-event ITL, which may pass to its histogram
		a.dists["decode_itl"].materialize()
	}
	epITL := a.mergeEndpointITL()
	s := &Summary{Files: files, Options: a.opts, Reqs: a.reqs, dists: a.dists, eventTimes: a.eventTimes, failTimes: a.failTimes,
		ExcludedWarmup: a.sawWarmup, ExcludedByWindow: a.outWindow, Requests: len(a.reqs)}
	s.describeRun()
	s.span(a.sawWarmup > 0)
	var succ []*Request
	for i := range a.reqs {
		q := &a.reqs[i]
		if q.Truncated {
			s.Truncated++
			if q.Success {
				s.TruncatedCompleted++
			}
		}
		if !q.Success {
			switch q.ErrorKind {
			case string(trace.ErrParentFailed):
				s.NotSent++
			case string(trace.ErrCanceledByClient):
				s.CanceledByClient++
			default:
				s.Failed++
			}
			continue
		}
		succ = append(succ, q)
		s.Completed++
		if q.NonStreaming {
			s.NonStreaming++
		}
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
	// The per-event work is the largest piece: the per-event ITL's
	// statistics, the decode-only ITL's and the steady window (a pass over
	// the event times and the statistics of its gaps) run on their own
	// goroutines while the rest is computed. They only read the requests,
	// samples and event times, and each writes its own result.
	var wg sync.WaitGroup
	s.stats(&wg)
	var decodeITL Stats
	wg.Go(func() { decodeITL = s.dists["decode_itl"].Stats(s.Options.Percentiles) })
	wg.Go(s.steady)
	s.MaxOutputTokensPerS = a.peakOutput(succ)
	s.MaxConcurrentRequests = peakConcurrency(succ)
	s.errors(a.errMsg)
	s.cacheAndTurns()
	s.multiTurn()
	s.sessions()
	s.media()
	s.series(a.tokBins, a.msgBins)
	s.health()
	wg.Wait()
	s.ITL = [...]Stats{s.ITLPerEvent, s.ITLPerToken, s.ITLRequestMean, s.ITLFirstContent}[s.Options.ITL]
	s.endpoints(epITL)
	s.models()
	s.slices()
	s.requestFigures(decodeITL)
	s.TokensPerEvent = a.eventTokens.summary(s.Options.Percentiles)
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

// stats computes every distribution's statistics; the distributions are
// independent, so the large per-event ones run on their own goroutines,
// added to wg: s.ITL is set by the caller once wg is done.
func (s *Summary) stats(wg *sync.WaitGroup) {
	ps := s.Options.Percentiles
	targets := map[string]*Stats{
		"ttft": &s.TTFT, "tpot": &s.TPOT, "e2el": &s.E2EL,
		"itl": &s.ITLPerEvent, "itl_per_token": &s.ITLPerToken, "itl_request_mean": &s.ITLRequestMean,
		"itl_first_content": &s.ITLFirstContent,
		"corrected_ttft":    &s.CorrectedTTFT, "corrected_e2el": &s.CorrectedE2EL,
		"queue": &s.Queue, "send_delay": &s.SendDelay,
	}
	twins := s.dists["itl_per_token"].sameAs(s.dists["itl"])
	for name, dst := range targets {
		d := s.dists[name]
		if name == "itl_per_token" && twins {
			continue // the per-event statistics, copied below
		}
		if name == "itl" || name == "itl_per_token" {
			wg.Go(func() {
				*dst = d.Stats(ps)
				if twins {
					s.ITLPerToken = *dst
					s.ITLPerToken.Percentiles = slices.Clone(dst.Percentiles)
				}
			})
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
	return s.dists[[...]string{"itl", "itl_per_token", "itl_request_mean", "itl_first_content"}[s.Options.ITL]]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
