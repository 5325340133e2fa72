package analyze

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// Per-request figures beside vLLM's block, for today's models: reasoning,
// the second token, decode-only gaps and per-user rates. vLLM's block
// keeps vLLM's definitions; these are named as AIPerf names them where it
// has a name (time_to_second_token, time_to_first_output_token,
// output_token_throughput_per_user, prefill_throughput_per_user,
// reasoning_token_count), and docs/metrics.md states each definition.

// Values are the statistics of a figure that is not a duration (tokens,
// tokens per second, ratios), in its own unit: Stats without the "_ms".
type Values struct {
	Count       int        `json:"count"`
	Mean        float64    `json:"mean"`
	Median      float64    `json:"median"`
	Std         float64    `json:"std"`
	Min         float64    `json:"min"`
	Max         float64    `json:"max"`
	Percentiles []ValuePct `json:"percentiles"`
}

// ValuePct is one percentile of Values.
type ValuePct struct {
	P     float64 `json:"p"`
	Value float64 `json:"value"`
}

// unitScale is what Dist.Stats divides by (it reports nanoseconds as
// milliseconds): a unitless sample is added times unitScale to read back
// as itself.
const unitScale = 1e6

// valuesOf reads a Dist of unitless samples added through addValue.
func valuesOf(d *Dist, ps []float64) Values {
	st := d.Stats(ps)
	v := Values{Count: st.Count, Mean: st.Mean, Median: st.Median, Std: st.Std, Min: st.Min, Max: st.Max,
		Percentiles: make([]ValuePct, len(st.Percentiles))}
	for i, p := range st.Percentiles {
		v.Percentiles[i] = ValuePct{P: p.P, Value: p.Value}
	}
	return v
}

// addValue adds a unitless sample to d (see unitScale).
func addValue(d *Dist, v float64) { d.Add(v * unitScale) }

// RequestFigures are the per-request figures of the completed requests of
// the generating APIs. Durations are Stats (ms) over the streamed
// requests; the rest are Values in the unit their name says.
type RequestFigures struct {
	// TimeToSecondToken: the second streamed event - the first, over the
	// streams with at least two events (AIPerf's TTST; a role-only first
	// chunk counts as an event, as in vLLM's TTFT).
	TimeToSecondToken Stats `json:"time_to_second_token"`
	// TimeToFirstOutputToken: the first event with answer text or a tool
	// call - start (AIPerf's TTFO); streams without one are left out.
	TimeToFirstOutputToken Stats `json:"time_to_first_output_token"`
	// ReasoningDuration: the first streamed event - the first answer event
	// (TTFO - TTFT), or to the last event when no answer came, over the
	// streams whose tokens began before their answer. It ends at the
	// answer, not at the last reasoning event, so TTFT + reasoning =
	// TTFO: the wait the user sees; reasoning interleaved later (between
	// tool calls) is in the answer's time.
	ReasoningDuration Stats `json:"reasoning_duration"`
	// DecodeITL: every gap between consecutive events after the second
	// (EventNs[i] - EventNs[i-1], i >= 2), pooled over the streams: vLLM's
	// per-event ITL without each stream's first gap, which holds the
	// tail of prefill and scheduling rather than decoding.
	DecodeITL Stats `json:"decode_itl"`
	// OutputTokenThroughputPerUser: 1 / TPOT, per request with more than
	// one output token = (output tokens - 1) / (E2EL - TTFT), tok/s
	// (AIPerf: 1 / its ITL, which is vLLM's TPOT).
	OutputTokenThroughputPerUser Values `json:"output_token_throughput_per_user"`
	// PrefillThroughputPerUser: prompt tokens / TTFT, per stream, tok/s
	// (AIPerf's; cached prompt tokens count, so a cache hit raises it).
	PrefillThroughputPerUser Values `json:"prefill_throughput_per_user"`
	// ReasoningTokenCount and AnswerTokenCount per request: usage's
	// reasoning tokens where reported, else the tokens of the events
	// before the first answer event; answer = output - reasoning.
	ReasoningTokenCount Values `json:"reasoning_token_count"`
	AnswerTokenCount    Values `json:"answer_token_count"`
	// TotalReasoningTokens and TotalAnswerTokens sum them; ReasoningFromUsage
	// and ReasoningCounted count the requests of each source.
	TotalReasoningTokens int64 `json:"total_reasoning_tokens"`
	TotalAnswerTokens    int64 `json:"total_answer_tokens"`
	ReasoningFromUsage   int   `json:"reasoning_from_usage"`
	ReasoningCounted     int   `json:"reasoning_counted"`
}

// requestFigures fills s.Figures from the completed requests; decode is
// the statistics of the pooled decode-only gaps the accumulator collected.
func (s *Summary) requestFigures(decode Stats) {
	lim, ps := s.Options.MaxExactSamples, s.Options.Percentiles
	ttst, ttfo, reason := newDist(lim), newDist(lim), newDist(lim)
	otps, ptps, rtok, atok := newDist(lim), newDist(lim), newDist(lim), newDist(lim)
	f := &s.Figures
	for i := range s.Reqs {
		q := &s.Reqs[i]
		if !q.Success || !trace.Generates(q.Endpoint) {
			continue
		}
		addValue(rtok, float64(q.Reasoning))
		addValue(atok, float64(q.Answer))
		f.TotalReasoningTokens += int64(q.Reasoning)
		f.TotalAnswerTokens += int64(q.Answer)
		if q.ReasoningCounted {
			f.ReasoningCounted++
		} else {
			f.ReasoningFromUsage++
		}
		if q.NonStreaming {
			continue
		}
		if q.Events > 1 {
			ttst.Add(float64(q.TTSTNs))
		}
		if q.Answered {
			ttfo.Add(float64(q.TTFONs))
		}
		if q.thoughtFirst {
			reason.Add(float64(q.ReasoningNs))
		}
		if q.TPOTNs > 0 {
			addValue(otps, q.outputTPSPerUser())
		}
		if q.TTFTNs > 0 {
			addValue(ptps, q.prefillTPSPerUser())
		}
	}
	f.TimeToSecondToken, f.TimeToFirstOutputToken, f.ReasoningDuration = ttst.Stats(ps), ttfo.Stats(ps), reason.Stats(ps)
	f.DecodeITL = decode
	f.OutputTokenThroughputPerUser, f.PrefillThroughputPerUser = valuesOf(otps, ps), valuesOf(ptps, ps)
	f.ReasoningTokenCount, f.AnswerTokenCount = valuesOf(rtok, ps), valuesOf(atok, ps)
}

// outputTPSPerUser is 1 / TPOT in tok/s; 0 without a TPOT.
func (q *Request) outputTPSPerUser() float64 {
	if q.NonStreaming || q.TPOTNs <= 0 {
		return 0
	}
	return 1e9 / q.TPOTNs
}

// prefillTPSPerUser is prompt tokens / TTFT in tok/s; 0 without a TTFT.
func (q *Request) prefillTPSPerUser() float64 {
	if q.NonStreaming || q.TTFTNs <= 0 {
		return 0
	}
	return float64(q.PromptTokens) / (float64(q.TTFTNs) / 1e9)
}

// cacheHitRate is cached / prompt tokens; -1 when the server did not
// report cached tokens (or the prompt is empty).
func (q *Request) cacheHitRate() float64 {
	if q.CachedTokens < 0 || q.PromptTokens <= 0 {
		return -1
	}
	return float64(q.CachedTokens) / float64(q.PromptTokens)
}

// valuesRow prints Values in statsRow's columns.
func valuesRow(b *bufio.Writer, name string, v Values) {
	fmt.Fprintf(b, "%-34s %8d %10.2f %10.2f", name, v.Count, v.Mean, v.Median)
	for _, p := range v.Percentiles {
		fmt.Fprintf(b, " %10.2f", p.Value)
	}
	fmt.Fprintf(b, " %10.2f\n", v.Max)
}

// writeFigures prints the per-request figures, durations then rates and
// token counts, under their JSON names.
func (s *Summary) writeFigures(b *bufio.Writer) {
	f := &s.Figures
	fmt.Fprintln(b, center("Per-request figures", '-', 50))
	s.statsHeader(b, "duration (ms)")
	statsRow(b, "time_to_second_token", f.TimeToSecondToken)
	statsRow(b, "time_to_first_output_token", f.TimeToFirstOutputToken)
	statsRow(b, "reasoning_duration", f.ReasoningDuration)
	statsRow(b, "decode_itl", f.DecodeITL)
	s.statsHeader(b, "rate or count")
	valuesRow(b, "output_token_throughput_per_user", f.OutputTokenThroughputPerUser)
	valuesRow(b, "prefill_throughput_per_user", f.PrefillThroughputPerUser)
	valuesRow(b, "reasoning_token_count", f.ReasoningTokenCount)
	valuesRow(b, "answer_token_count", f.AnswerTokenCount)
	// Where the reasoning counts came from is in the JSON
	// (reasoning_from_usage, reasoning_counted): the text reads the same
	// for a recording whose usage predates the reasoning column.
	fmt.Fprintf(b, "%-40s %d reasoning, %d answer\n", "Output tokens:", f.TotalReasoningTokens, f.TotalAnswerTokens)
	s.writeEventTokens(b)
}

// writeFiguresHTML writes the per-request figures as one table.
func (s *Summary) writeFiguresHTML(b *strings.Builder) {
	f := &s.Figures
	fmt.Fprintf(b, "<h2 id=\"per-request\">Per-request figures</h2>\n<table class=\"figures\">\n<tr><th>figure</th><th>unit</th><th>count</th><th>mean</th><th>median</th>")
	for _, p := range s.Options.Percentiles {
		fmt.Fprintf(b, "<th>P%s</th>", pWord(p))
	}
	b.WriteString("<th>max</th></tr>\n")
	row := func(name, unit string, n int, mean, median, max float64, pcts []float64) {
		fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td><td>%d</td><td>%.2f</td><td>%.2f</td>", name, unit, n, mean, median)
		for _, v := range pcts {
			fmt.Fprintf(b, "<td>%.2f</td>", v)
		}
		fmt.Fprintf(b, "<td>%.2f</td></tr>\n", max)
	}
	for _, d := range []struct {
		name string
		st   Stats
	}{{"time_to_second_token", f.TimeToSecondToken}, {"time_to_first_output_token", f.TimeToFirstOutputToken},
		{"reasoning_duration", f.ReasoningDuration}, {"decode_itl", f.DecodeITL}} {
		var ps []float64
		for _, p := range d.st.Percentiles {
			ps = append(ps, p.Value)
		}
		row(d.name, "ms", d.st.Count, d.st.Mean, d.st.Median, d.st.Max, ps)
	}
	for _, d := range []struct {
		name, unit string
		v          Values
	}{{"output_token_throughput_per_user", "tok/s", f.OutputTokenThroughputPerUser},
		{"prefill_throughput_per_user", "tok/s", f.PrefillThroughputPerUser},
		{"reasoning_token_count", "tokens", f.ReasoningTokenCount}, {"answer_token_count", "tokens", f.AnswerTokenCount},
		{"per_request_hit_rate", "ratio", s.Cache.PerRequest}, {"per_session_hit_rate", "ratio", s.Cache.PerSession}} {
		var ps []float64
		for _, p := range d.v.Percentiles {
			ps = append(ps, p.Value)
		}
		row(d.name, d.unit, d.v.Count, d.v.Mean, d.v.Median, d.v.Max, ps)
	}
	b.WriteString("</table>\n")
	s.writeEventTokensHTML(b)
}
