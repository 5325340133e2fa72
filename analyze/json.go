package analyze

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// vLLM's defaults for the fields a recording does not carry.
const vllmEndpointType = "openai-chat"

// JSON returns the result as vLLM's --save-result writes it, plus
// tracekit's figures under the key "tracekit". With detailed, it adds
// vLLM's --save-detailed lists (input_lens, output_lens, ttfts, itls,
// latencies, errors; times in seconds; failed requests give 0 and []).
func (s *Summary) JSON(detailed bool) map[string]any {
	r := map[string]any{
		"date":                    time.Unix(0, s.StartWallNs).Format("20060102-150405"),
		"endpoint_type":           vllmEndpointType,
		"backend":                 vllmEndpointType,
		"label":                   nil,
		"model_id":                nilIfEmpty(s.Model),
		"tokenizer_id":            nilIfEmpty(s.Tokenizer),
		"num_prompts":             s.Requests,
		"request_rate":            "inf",
		"burstiness":              s.Burstiness,
		"max_concurrency":         nil,
		"duration":                s.Duration,
		"completed":               s.Completed,
		"failed":                  s.Failed,
		"total_input_tokens":      s.TotalInput,
		"total_output_tokens":     s.TotalOutput,
		"request_throughput":      s.RequestThroughput,
		"request_goodput":         nil,
		"output_throughput":       s.OutputThroughput,
		"total_token_throughput":  s.TotalTokenThroughput,
		"max_output_tokens_per_s": s.MaxOutputTokensPerS,
		"max_concurrent_requests": s.MaxConcurrentRequests,
	}
	if s.RequestRate > 0 {
		r["request_rate"] = s.RequestRate
	}
	if s.MaxConcurrency > 0 {
		r["max_concurrency"] = s.MaxConcurrency
	}
	if !s.Options.Goodput.IsZero() {
		r["request_goodput"] = s.RequestGoodput
	}
	for _, m := range metricInfo {
		if !s.Options.hasMetric(m.key) {
			continue
		}
		st := s.metric(m.key)
		r["mean_"+m.key+"_ms"] = st.Mean
		r["median_"+m.key+"_ms"] = st.Median
		r["std_"+m.key+"_ms"] = st.Std
		for _, p := range st.Percentiles {
			r["p"+pWord(p.P)+"_"+m.key+"_ms"] = p.Value
		}
	}
	if detailed {
		s.addDetail(r)
	}
	r["tracekit"] = struct {
		*Summary
		Selection map[string]any `json:"selection"`
	}{s, map[string]any{
		"window":         s.Options.Window.String(),
		"include_warmup": s.Options.IncludeWarmup,
		"itl":            s.Options.ITL.String(),
		"success":        s.Options.Success.String(),
		"start":          s.Options.Start.String(),
		"percentiles":    s.Options.Percentiles,
		"metrics":        s.Options.Metrics,
		"goodput":        s.Options.Goodput,
		"hist_rel_err":   HistRelErr,
	}}
	return r
}

func (s *Summary) addDetail(r map[string]any) {
	n := len(s.Reqs)
	in, out := make([]int32, n), make([]int32, n)
	ttfts, lats := make([]float64, n), make([]float64, n)
	itls, errs := make([][]float64, n), make([]string, n)
	for i := range s.Reqs {
		q := &s.Reqs[i]
		in[i] = q.PromptTokens
		itls[i] = []float64{}
		if !q.Success {
			errs[i] = q.ErrorKind
			continue
		}
		out[i] = q.OutputTokens
		ttfts[i], lats[i] = float64(q.TTFTNs)/1e9, float64(q.E2ELNs)/1e9
		itls[i] = s.requestGaps(q)
	}
	r["input_lens"], r["output_lens"], r["ttfts"] = in, out, ttfts
	r["itls"], r["latencies"], r["errors"] = itls, lats, errs
}

// requestGaps returns a successful request's event gaps in seconds, or
// none when the run was too large to keep event times.
func (s *Summary) requestGaps(q *Request) []float64 {
	if q.NonStreaming || s.eventTimes == nil || q.evOff+int(q.Events) > len(s.eventTimes) {
		return []float64{}
	}
	ts := s.eventTimes[q.evOff : q.evOff+int(q.Events)]
	g := make([]float64, 0, max(len(ts)-1, 0))
	for i := 1; i < len(ts); i++ {
		g = append(g, float64(ts[i]-ts[i-1])/1e9)
	}
	return g
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// WriteJSON writes JSON(detailed), indented.
func (s *Summary) WriteJSON(w io.Writer, detailed bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s.JSON(detailed)); err != nil {
		return fmt.Errorf("encoding JSON result: %w", err)
	}
	return nil
}
