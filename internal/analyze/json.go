package analyze

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// vLLM's defaults for the fields a recording does not carry.
const vllmEndpointType = "openai-chat"

// JSON returns the result as vLLM's --save-result writes it, plus
// tracekit's figures under the key "tracekit": the per-request lists vLLM
// always saves, and with detailed those of its --save-detailed (see
// addLists).
func (s *Summary) JSON(detailed bool) map[string]any {
	r := map[string]any{
		"date":                    time.Unix(0, s.StartWallNs).Format("20060102-150405"),
		"endpoint_type":           vllmEndpointType,
		"backend":                 vllmEndpointType,
		"label":                   nil,
		"model_id":                nilIfEmpty(s.Model),
		"tokenizer_id":            nilIfEmpty(s.Tokenizer),
		"num_prompts":             s.Requests - s.NotSent, // vLLM's: the requests sent
		"request_rate":            "inf",
		"burstiness":              s.Burstiness,
		"max_concurrency":         nil,
		"duration":                s.Duration,
		"completed":               s.Completed,
		"failed":                  s.Failed + s.CanceledByClient, // vLLM's: sent and not completed
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
	s.addLists(r, detailed)
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

// addLists adds vLLM's per-request lists, one entry per analyzed request
// that was sent (not the NotSent ones: vLLM lists the requests it sent) in
// file order, times in seconds. Always (vLLM saves them without
// --save-detailed): latencies (E2EL of a success, 0 for a failure: vLLM's
// client never sets it), queue_times (start - intended: vLLM's wait for
// its concurrency semaphore, here also the schedule's dispatch lag) and
// rtfx (0: no audio). With detailed: input_lens (usage.prompt_tokens, else
// the client's count, as vLLM's prompt_len), output_lens (0 for a
// failure), start_times (seconds from the run start; vLLM's are
// perf_counter() readings with an arbitrary origin), ttfts and itls (a
// failed request that got HTTP 200 keeps what it streamed before failing,
// as vLLM's does; others give 0 and []), errors ("" for a success, else the
// recorded message). vLLM's generated_texts are not recorded.
func (s *Summary) addLists(r map[string]any, detailed bool) {
	reqs := s.Reqs
	if s.NotSent > 0 {
		reqs = make([]Request, 0, len(s.Reqs)-s.NotSent)
		for i := range s.Reqs {
			if s.Reqs[i].ErrorKind != string(trace.ErrParentFailed) {
				reqs = append(reqs, s.Reqs[i])
			}
		}
	}
	n := len(reqs)
	lats, queues := make([]float64, n), make([]float64, n)
	for i := range reqs {
		q := &reqs[i]
		queues[i] = float64(q.StartNs-q.IntendedNs) / 1e9
		if q.Success {
			lats[i] = float64(q.E2ELNs) / 1e9
		}
	}
	r["latencies"], r["queue_times"], r["rtfx"] = lats, queues, 0.0
	if !detailed {
		return
	}
	in, out := make([]int32, n), make([]int32, n)
	ttfts, starts := make([]float64, n), make([]float64, n)
	itls, errs := make([][]float64, n), make([]string, n)
	for i := range reqs {
		q := &reqs[i]
		in[i] = q.PromptTokens
		starts[i] = float64(q.StartNs) / 1e9
		itls[i] = []float64{}
		if q.Success {
			out[i] = q.OutputTokens
		} else {
			errs[i] = q.ErrorMessage
			if errs[i] == "" {
				errs[i] = q.ErrorKind
			}
		}
		if q.NonStreaming || q.Events == 0 || (!q.Success && q.Status != 200) {
			continue
		}
		ttfts[i] = float64(q.FirstNs-q.StartNs) / 1e9
		itls[i] = s.requestGaps(q)
	}
	r["input_lens"], r["output_lens"], r["start_times"] = in, out, starts
	r["ttfts"], r["itls"], r["errors"] = ttfts, itls, errs
}

// requestGaps returns a request's event gaps in seconds, or none when the
// run was too large to keep its event times.
func (s *Summary) requestGaps(q *Request) []float64 {
	times := s.eventTimes
	if !q.Success {
		times = s.failTimes
	}
	if q.evOff < 0 || times == nil || q.evOff+int(q.Events) > len(times) {
		return []float64{}
	}
	ts := times[q.evOff : q.evOff+int(q.Events)]
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
