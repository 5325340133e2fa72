package analyze

import (
	"slices"

	"github.com/tracekit/tracekit/internal/telemetry"
)

// serverSpec is the speculative decoding figures of target: c's counters
// (over the bracketing scrapes) through counter, the server's own mean
// acceptance length (a gauge over the window's scrapes), and the stream's tokens per decode event. Nil when the server shows no
// drafts and the stream never carried more than one token per event.
func (s *Summary) serverSpec(target string, c telemetry.Summary,
	counter func(string, telemetry.CounterStat) *ServerCounter, acceptLength *ServerGauge) *ServerSpec {
	sp := &ServerSpec{
		Drafts:             counter("SpecDrafts", c.SpecDrafts),
		DraftTokens:        counter("SpecDraftTokens", c.SpecDraftTokens),
		AcceptedTokens:     counter("SpecAccepted", c.SpecAccepted),
		ServerAcceptLength: acceptLength,
	}
	if a := sp.AcceptedTokens; a != nil {
		if d := sp.DraftTokens; d != nil && d.Increase > 0 {
			sp.AcceptanceRate = finite(a.Increase / d.Increase)
		}
		if d := sp.Drafts; d != nil && d.Increase > 0 {
			sp.MeanAcceptanceLength = finite(1 + a.Increase/d.Increase)
		}
	}
	var perReq []float64
	multi, memo := false, map[string]bool{}
	for i := range s.Reqs {
		q := &s.Reqs[i]
		if !q.Success || q.NonStreaming || q.ContentEvents < 2 || !sentTo(memo, q, target) {
			continue
		}
		ev, tok := int64(q.ContentEvents-1), int64(q.ClientOutputTokens-q.FirstContentTokens)
		sp.StreamEvents += ev
		sp.StreamTokens += tok
		perReq = append(perReq, float64(tok)/float64(ev))
		multi = multi || tok > ev
	}
	if sp.StreamEvents > 0 {
		sp.StreamTokensPerEvent = finite(float64(sp.StreamTokens) / float64(sp.StreamEvents))
		slices.Sort(perReq)
		for _, p := range []float64{10, 50, 90} {
			sp.StreamPerRequest = append(sp.StreamPerRequest, PValue{P: p, V: Percentile(perReq, p)})
		}
	}
	drafted := sp.Drafts != nil && sp.Drafts.Increase > 0 || sp.ServerAcceptLength != nil
	if !drafted && !multi {
		return nil
	}
	return sp
}

// sentTo reports whether q was sent to the server whose metrics URL is
// target; memo keeps each request target's answer.
func sentTo(memo map[string]bool, q *Request, target string) bool {
	v, ok := memo[q.Target]
	if !ok {
		v = telemetry.MetricsURL(telemetry.Redact(q.Target)) == target
		memo[q.Target] = v
	}
	return v
}

// serverEnergy is the energy figures of a target exporting DCGM's
// counters: g over the window's scrapes (the power gauge), c over the
// scrapes bracketing it (the energy counter). Nil without the counter.
func (s *Summary) serverEnergy(g, c telemetry.Summary) *ServerEnergy {
	st := c.EnergyMJ
	if !st.OK || finite(st.Increase) == nil {
		return nil
	}
	e := &ServerEnergy{Metric: c.Used["EnergyMJ"], GPUs: st.Series, Joules: st.Increase / 1e3,
		SpanS: float64(st.ToNs-st.FromNs) / 1e9, Resets: st.Resets,
		OutputTokens: s.TotalOutput, Requests: s.Completed}
	if e.SpanS > 0 {
		e.MeanPowerW = e.Joules / e.SpanS
	}
	if g.PowerW.OK {
		e.PowerGaugeW = finite(g.PowerW.Mean)
	}
	if e.Joules > 0 {
		e.TokensPerJoule = finite(float64(e.OutputTokens) / e.Joules)
	}
	if e.Requests > 0 {
		e.JoulesPerRequest = finite(e.Joules / float64(e.Requests))
	}
	return e
}
