package mock

import (
	"fmt"
	"io"
	"math/bits"
	"sync/atomic"
)

// histogram is a lock-free log-linear histogram of non-negative
// nanoseconds: each power of two is split into 4 buckets, so a quantile is
// reported with at most 19% (2^(1/4)) relative error. Recording is one
// atomic add.
type histogram struct {
	counts [64 * 4]atomic.Int64
	max    atomic.Int64
	n      atomic.Int64
	sum    atomic.Int64
}

func bucketOf(v int64) int {
	if v < 4 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // v in [2^e, 2^(e+1))
	sub := int(uint64(v)>>(e-2)) & 3
	return e*4 + sub
}

// bucketUpper is the exclusive upper bound of bucket i.
func bucketUpper(i int) int64 {
	if i < 4 {
		return int64(i) + 1
	}
	e, sub := i/4, i%4
	return int64(4+sub+1) << (e - 2)
}

func (h *histogram) record(v int64) {
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// quantile returns an upper bound of the q-quantile (0 when empty), never
// above the maximum seen.
func (h *histogram) quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.5)
	rank = min(max(rank, 1), n)
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(bucketUpper(i), h.max.Load())
		}
	}
	return h.max.Load()
}

// metrics are the server's counters, exported on /metrics.
type metrics struct {
	running, waiting        atomic.Int64
	requests, okRequests    atomic.Int64
	faults, badRequests     atomic.Int64
	clientGone              atomic.Int64
	promptTokens, genTokens atomic.Int64
	cacheQueries, cacheHits atomic.Int64
	events                  atomic.Int64
	slowStreams             atomic.Int64 // handed back from the scheduler: the client did not keep up
	lateness                histogram    // event write lateness vs schedule, ns
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
}

func (m *metrics) stats() Stats {
	return Stats{
		Requests: m.requests.Load(), Events: m.events.Load(),
		Running: m.running.Load(), Waiting: m.waiting.Load(),
		LatenessP50Ns: m.lateness.quantile(0.5), LatenessP99Ns: m.lateness.quantile(0.99),
		LatenessMaxNs: m.lateness.max.Load(),
		PromptTokens:  m.promptTokens.Load(), GenerationTokens: m.genTokens.Load(),
		CacheHitTokens: m.cacheHits.Load(),
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
	counter("vllm:prompt_tokens_total", "Prompt tokens received.", m.promptTokens.Load())
	counter("vllm:generation_tokens_total", "Tokens generated.", m.genTokens.Load())
	counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", m.cacheQueries.Load())
	counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", m.cacheHits.Load())
	counter("tracekit_mock_requests_total", "Completion requests received.", m.requests.Load())
	counter("tracekit_mock_requests_ok_total", "Completion requests answered in full.", m.okRequests.Load())
	counter("tracekit_mock_faults_total", "Requests given an injected fault.", m.faults.Load())
	counter("tracekit_mock_bad_requests_total", "Requests rejected as invalid.", m.badRequests.Load())
	counter("tracekit_mock_client_gone_total", "Streams the client closed early.", m.clientGone.Load())
	counter("tracekit_mock_events_total", "Stream events with choices written.", m.events.Load())
	counter("tracekit_mock_slow_streams_total", "Streams whose client did not read fast enough for non-blocking writes; each went on on its own goroutine.", m.slowStreams.Load())
	name := "tracekit_mock_event_lateness_seconds"
	fmt.Fprintf(w, "# HELP %s How late each event write returned versus the latency model's schedule; if high, the mock itself is the bottleneck.\n# TYPE %s summary\n", name, name)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		fmt.Fprintf(w, "%s{model_name=%q,quantile=\"%g\"} %g\n", name, model, q, float64(m.lateness.quantile(q))/1e9)
	}
	fmt.Fprintf(w, "%s_sum%s %g\n%s_count%s %d\n", name, l, float64(m.lateness.sum.Load())/1e9, name, l, m.lateness.n.Load())
	fmt.Fprintf(w, "# HELP %s_max Largest event lateness.\n# TYPE %s_max gauge\n%s_max%s %g\n", name, name, name, l, float64(m.lateness.max.Load())/1e9)
}
