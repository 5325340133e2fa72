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
