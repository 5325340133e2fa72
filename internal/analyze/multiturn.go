package analyze

import (
	"math"
	"slices"
)

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

// multiTurn builds vLLM multi-turn's statistics table with that
// benchmark client's definitions, over the requests it would count
// (Request.MultiTurnValid), whatever Options.Success says:
//
//   - latency_ms: start to the end of the body (done_ns: its data: [DONE],
//     or the clean end of a stream without it);
//   - ttft_ms: start to the first chunk carrying content (a role-only
//     chunk does not count); when that chunk carried k > 1 tokens, minus
//     (k-1) * tpot_ms, at least 0.1 ms; a non-streaming answer's is its
//     latency;
//   - tpot_ms: (latency - first-content time) / (output tokens - tokens of
//     the first content chunk), 0 when that is not positive (one-token and
//     one-chunk answers are kept, as 0);
//   - input_num_turns: the messages sent, user and assistant (2*turn+1);
//     input_num_tokens and output_num_tokens: the client's counts (the
//     trace's tokenizer for the prompt, history included; the event
//     tokens for the answer); output_num_chunks: content chunks - 1;
//   - runtime_sec: from the first start to the end of the last-started
//     request; requests_per_sec: requests / runtime.
//
// Percentiles 25, 50, 75, 90, and 99, 99.9, 99.99 from 100, 1,000 and
// 10,000 requests; std is the sample std (pandas, ddof=1).
func (s *Summary) multiTurn() {
	rows := []DescribeRow{{Name: "ttft_ms"}, {Name: "tpot_ms"}, {Name: "latency_ms"},
		{Name: "input_num_turns"}, {Name: "input_num_tokens"}, {Name: "output_num_tokens"}, {Name: "output_num_chunks"}}
	var valid []*Request
	for i := range s.Reqs {
		if q := &s.Reqs[i]; q.MultiTurnValid {
			valid = append(valid, q)
		}
	}
	for _, q := range valid {
		ttft, tpot, latency := multiTurnTimes(q)
		chunks := max(q.ContentEvents-1, 0)
		if q.NonStreaming {
			chunks = 0
		}
		for k, v := range []float64{ttft, tpot, latency, float64(2*q.Turn + 1), float64(q.InputTokens),
			float64(q.ClientOutputTokens), float64(chunks)} {
			rows[k].values = append(rows[k].values, v)
		}
	}
	ps := []float64{25, 50, 75, 90}
	cols := []string{"25%", "50%", "75%", "90%"}
	for _, x := range []struct {
		n int
		p float64
	}{{100, 99}, {1000, 99.9}, {10000, 99.99}} {
		if len(valid) >= x.n {
			ps, cols = append(ps, x.p), append(cols, pWord(x.p)+"%")
		}
	}
	mt := MultiTurnStats{Columns: cols}
	if len(valid) > 0 {
		// The table is sorted by start; runtime ends with the last-started request.
		first, last := valid[0], valid[0]
		for _, q := range valid {
			if q.StartNs < first.StartNs {
				first = q
			}
			if q.StartNs >= last.StartNs {
				last = q
			}
		}
		_, _, lat := multiTurnTimes(last)
		mt.RuntimeSec = (float64(last.StartNs-first.StartNs)/1e6 + lat) / 1e3
		mt.RequestsPerSec = ratio(float64(len(valid)), mt.RuntimeSec)
	}
	for _, r := range rows {
		mt.Rows = append(mt.Rows, describe(r.Name, r.values, ps))
	}
	s.MultiTurn = mt
}

// multiTurnTimes are one request's ttft_ms, tpot_ms and latency_ms as vLLM
// multi-turn's client computes them (see multiTurn).
func multiTurnTimes(q *Request) (ttft, tpot, latency float64) {
	latency = float64(max(q.DoneNs, q.LastNs)-q.StartNs) / 1e6
	if q.NonStreaming {
		return latency, 0, latency
	}
	first := float64(q.FirstContentNs-q.StartNs) / 1e6
	if decode := q.ClientOutputTokens - q.FirstContentTokens; q.ClientOutputTokens > 1 && decode > 0 {
		tpot = (latency - first) / float64(decode)
	}
	ttft = first
	if q.FirstContentTokens > 1 {
		ttft = max(0.1, first-float64(q.FirstContentTokens-1)*tpot)
	}
	return ttft, tpot, latency
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
