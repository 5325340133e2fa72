package analyze

import (
	"cmp"
	"slices"

	"github.com/tracekit/tracekit/trace"
)

// CacheStats sums usage.prompt_tokens_details.cached_tokens over the
// successful requests that reported it.
type CacheStats struct {
	Reporting    int     `json:"requests_reporting"`
	CachedTokens int64   `json:"cached_tokens"`
	PromptTokens int64   `json:"prompt_tokens"` // of the reporting requests
	HitRatio     float64 `json:"hit_ratio"`     // CachedTokens / PromptTokens
	// PerRequest is the distribution of each reporting request's hit
	// rate, cached / prompt tokens (0..1; requests with a prompt).
	PerRequest Values `json:"per_request_hit_rate"`
	// PerSession is the distribution over conversations of their hit
	// rate: the sum of their reporting requests' cached tokens / the sum
	// of their prompt tokens, so a long turn weighs more than a short one.
	PerSession Values `json:"per_session_hit_rate"`
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
	generating      int // completed requests of generating APIs: TPOT's mean is theirs
	ttfts           []float64
}

func (s *Summary) cacheAndTurns() {
	byTurn := map[int32]*TurnStats{}
	lim, ps := s.Options.MaxExactSamples, s.Options.Percentiles
	perReq := newDist(lim)
	type session struct{ cached, prompts int64 }
	bySession := map[string]*session{}
	var order []string
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
		if !q.NonStreaming {
			t.ttfts = append(t.ttfts, float64(q.TTFTNs)/1e6)
		}
		if trace.Generates(q.Endpoint) {
			t.MeanTPOTms += q.TPOTNs / 1e6
			t.generating++
		}
		t.MeanPrompt += float64(q.PromptTokens)
		t.MeanOutput += float64(q.OutputTokens)
		if q.CachedTokens >= 0 {
			t.reporting++
			t.cached += int64(q.CachedTokens)
			t.prompts += int64(q.PromptTokens)
			s.Cache.Reporting++
			s.Cache.CachedTokens += int64(q.CachedTokens)
			s.Cache.PromptTokens += int64(q.PromptTokens)
			if r := q.cacheHitRate(); r >= 0 {
				addValue(perReq, r)
			}
			c := bySession[q.ConversationID]
			if c == nil {
				c = &session{}
				bySession[q.ConversationID] = c
				order = append(order, q.ConversationID)
			}
			c.cached += int64(q.CachedTokens)
			c.prompts += int64(q.PromptTokens)
		}
	}
	perSession := newDist(lim)
	for _, id := range order {
		if c := bySession[id]; c.prompts > 0 {
			addValue(perSession, float64(c.cached)/float64(c.prompts))
		}
	}
	s.Cache.PerRequest, s.Cache.PerSession = valuesOf(perReq, ps), valuesOf(perSession, ps)
	s.Cache.HitRatio = ratio(float64(s.Cache.CachedTokens), float64(s.Cache.PromptTokens))
	for _, t := range byTurn {
		n := float64(t.Completed)
		slices.Sort(t.ttfts)
		t.MeanTTFTms = ratio(sum(t.ttfts), float64(len(t.ttfts)))
		t.P50TTFTms, t.P90TTFTms = Percentile(t.ttfts, 50), Percentile(t.ttfts, 90)
		t.MeanTPOTms, t.MeanPrompt, t.MeanOutput = ratio(t.MeanTPOTms, float64(t.generating)), ratio(t.MeanPrompt, n), ratio(t.MeanOutput, n)
		t.MeanCached = ratio(float64(t.cached), float64(t.reporting))
		t.CacheHitRatio = ratio(float64(t.cached), float64(t.prompts))
		t.ttfts = nil
		s.Turns = append(s.Turns, *t)
	}
	slices.SortFunc(s.Turns, func(a, b TurnStats) int { return cmp.Compare(a.Turn, b.Turn) })
}
