package mock

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/tracekit/tracekit/internal/clock"
)

// metrics are the server's counters, exported on /metrics.
type metrics struct {
	running, waiting        atomic.Int64
	requests, okRequests    atomic.Int64
	faults, badRequests     atomic.Int64
	clientGone              atomic.Int64
	promptTokens, genTokens atomic.Int64
	mediaItems, mediaTokens atomic.Int64 // of the prompts prefilled; mediaTokens are part of promptTokens
	cacheQueries, cacheHits atomic.Int64
	events                  atomic.Int64
	slowStreams             atomic.Int64   // handed back from the scheduler: the client did not keep up
	idleCloses              atomic.Int64   // connections closed by Config.IdleClose or an idleclose fault
	closedAfterResponse     atomic.Int64   // connections closed by CloseAfterResponse or a closeafter fault
	lateness                clock.Lateness // event write lateness vs schedule, ns

	// vLLM's request latency histograms, observed as each request goes
	// from the same stamps its log entry records (see the package doc).
	ttft, itl, e2e, queue *histogram
	kvTokens              atomic.Int64 // prompt + generated tokens of the admitted requests
	kvCapacity            int64        // Latency.PrefixCacheTokens

	// Speculative decoding (Latency.SpecK > 0): vLLM's counters.
	specK                               int
	specDrafts, specDraft, specAccepted atomic.Int64
	specPerPos                          []atomic.Int64 // accepted at draft position i
}

// specStep counts one speculative decode step that emitted accepted + 1
// tokens (the bonus token is not a draft's).
func (m *metrics) specStep(accepted int) {
	m.specDrafts.Add(1)
	m.specDraft.Add(int64(m.specK))
	m.specAccepted.Add(int64(accepted))
	for i := range accepted {
		m.specPerPos[i].Add(1)
	}
}

func (m *metrics) init(cfg Config) {
	m.ttft, m.itl = newHistogram(ttftBuckets), newHistogram(itlBuckets)
	m.e2e, m.queue = newHistogram(requestLatencyBuckets), newHistogram(requestLatencyBuckets)
	m.kvCapacity = int64(cfg.Latency.PrefixCacheTokens)
	m.specK = cfg.Latency.SpecK
	m.specPerPos = make([]atomic.Int64, m.specK)
}

// kvUsage models vllm:kv_cache_usage_perc: the tokens the admitted
// requests hold (prompt and output so far) over the prefix cache's
// capacity, at most 1; 0 without a cache.
func (m *metrics) kvUsage() float64 {
	if m.kvCapacity <= 0 {
		return 0
	}
	return min(1, float64(m.kvTokens.Load())/float64(m.kvCapacity))
}

// Stats is a snapshot of the server's own health.
type Stats struct {
	Requests         int64 `json:"requests"`
	Events           int64 `json:"events"`
	Running          int64 `json:"running"`
	Waiting          int64 `json:"waiting"`
	LatenessP50Ns    int64 `json:"lateness_p50_ns"`
	LatenessP99Ns    int64 `json:"lateness_p99_ns"`
	LatenessMaxNs    int64 `json:"lateness_max_ns"`
	PromptTokens     int64 `json:"prompt_tokens"`
	GenerationTokens int64 `json:"generation_tokens"`
	CacheHitTokens   int64 `json:"cache_hit_tokens"`
	// Speculative decoding: steps, draft tokens proposed, of them accepted.
	SpecDrafts         int64 `json:"spec_drafts"`
	SpecDraftTokens    int64 `json:"spec_draft_tokens"`
	SpecAcceptedTokens int64 `json:"spec_accepted_tokens"`
}

func (m *metrics) stats() Stats {
	return Stats{
		Requests: m.requests.Load(), Events: m.events.Load(),
		Running: m.running.Load(), Waiting: m.waiting.Load(),
		LatenessP50Ns: m.lateness.Quantile(0.5), LatenessP99Ns: m.lateness.Quantile(0.99),
		LatenessMaxNs: m.lateness.Max(),
		PromptTokens:  m.promptTokens.Load(), GenerationTokens: m.genTokens.Load(),
		CacheHitTokens: m.cacheHits.Load(),
		SpecDrafts:     m.specDrafts.Load(), SpecDraftTokens: m.specDraft.Load(), SpecAcceptedTokens: m.specAccepted.Load(),
	}
}

// writePrometheus writes the metrics in Prometheus text format 0.0.4, with
// vLLM's names where vLLM has the metric.
func (m *metrics) writePrometheus(w io.Writer, model string) {
	l := fmt.Sprintf("{model_name=%q}", model)
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s%s %d\n", name, help, name, name, l, v)
	}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s%s %d\n", name, help, name, name, l, v)
	}
	gauge("vllm:num_requests_running", "Requests in the batch.", m.running.Load())
	gauge("vllm:num_requests_waiting", "Requests waiting for a batch slot.", m.waiting.Load())
	fmt.Fprintf(w, "# HELP vllm:kv_cache_usage_perc KV-cache usage, 1 means 100 percent: the mock's model is the admitted requests' prompt and output tokens over prefix_cache_tokens.\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc%s %g\n", l, m.kvUsage())
	counter("vllm:num_preemptions_total", "Preemptions; the mock never preempts.", 0)
	counter("vllm:prompt_tokens_total", "Prompt tokens received.", m.promptTokens.Load())
	counter("vllm:generation_tokens_total", "Tokens generated.", m.genTokens.Load())
	counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", m.cacheQueries.Load())
	counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", m.cacheHits.Load())
	if m.specK > 0 { // vLLM exports them only with a speculative config
		counter("vllm:spec_decode_num_drafts_total", "Speculative decode steps.", m.specDrafts.Load())
		counter("vllm:spec_decode_num_draft_tokens_total", "Draft tokens proposed.", m.specDraft.Load())
		counter("vllm:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", m.specAccepted.Load())
		name := "vllm:spec_decode_num_accepted_tokens_per_pos_total"
		fmt.Fprintf(w, "# HELP %s Draft tokens accepted, by position in the draft.\n# TYPE %s counter\n", name, name)
		for i := range m.specPerPos {
			fmt.Fprintf(w, "%s{model_name=%q,position=\"%d\"} %d\n", name, model, i, m.specPerPos[i].Load())
		}
	}
	m.ttft.write(w, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", model)
	m.itl.write(w, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", model)
	m.itl.write(w, "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds (vLLM's older name of vllm:inter_token_latency_seconds, the same observations).", model)
	m.e2e.write(w, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", model)
	m.queue.write(w, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", model)
	counter("tracekit_mock_requests_total", "Completion requests received.", m.requests.Load())
	counter("tracekit_mock_requests_ok_total", "Completion requests answered in full.", m.okRequests.Load())
	counter("tracekit_mock_faults_total", "Requests given an injected fault.", m.faults.Load())
	counter("tracekit_mock_bad_requests_total", "Requests rejected as invalid.", m.badRequests.Load())
	counter("tracekit_mock_client_gone_total", "Streams the client closed early.", m.clientGone.Load())
	counter("tracekit_mock_media_items_total", "Images, video and audio items in the prompts prefilled.", m.mediaItems.Load())
	counter("tracekit_mock_media_tokens_total", "Prompt tokens the media items took (part of vllm:prompt_tokens_total).", m.mediaTokens.Load())
	counter("tracekit_mock_events_total", "Stream events with choices written.", m.events.Load())
	counter("tracekit_mock_slow_streams_total", "Streams whose client did not read fast enough for non-blocking writes; each went on on its own goroutine.", m.slowStreams.Load())
	counter("tracekit_mock_idle_closes_total", "Keep-alive connections closed silently after the idle time (idle_close or an idleclose fault).", m.idleCloses.Load())
	counter("tracekit_mock_closed_after_response_total", "Connections closed right after a response without Connection: close (close_after_response or a closeafter fault).", m.closedAfterResponse.Load())
	name := "tracekit_mock_event_lateness_seconds"
	fmt.Fprintf(w, "# HELP %s How late each event write returned versus the latency model's schedule; if high, the mock itself is the bottleneck.\n# TYPE %s summary\n", name, name)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		fmt.Fprintf(w, "%s{model_name=%q,quantile=\"%g\"} %g\n", name, model, q, float64(m.lateness.Quantile(q))/1e9)
	}
	fmt.Fprintf(w, "%s_sum%s %g\n%s_count%s %d\n", name, l, float64(m.lateness.Sum())/1e9, name, l, m.lateness.Count())
	fmt.Fprintf(w, "# HELP %s_max Largest event lateness.\n# TYPE %s_max gauge\n%s_max%s %g\n", name, name, name, l, float64(m.lateness.Max())/1e9)
}
