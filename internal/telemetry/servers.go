package telemetry

// Names are one server's metric names for what Summary reports. Each role
// lists alternatives, newest first; the first one present at a target is
// used. Counter names are the sample names as exposed (with _total).
type Names struct {
	Server string

	// Gauges.
	Running, Waiting []string // requests in the batch / waiting for it (summed over series)
	KVCacheUsage     []string // fraction of the KV cache in use, 0..1 (mean over series)

	// Counters (summed over series).
	Preemptions      []string
	PromptTokens     []string
	GenerationTokens []string
	PrefixQueries    []string // prompt tokens looked up in the prefix cache
	PrefixHits       []string // of which found
	Requests         []string // requests finished

	// Speculative decoding counters (summed over series): draft steps,
	// tokens proposed, and of them accepted. SpecAcceptLength is a gauge
	// of the mean acceptance length, for a server that exports no
	// counters (SGLang), SpecAcceptRate one of its acceptance rate.
	SpecDrafts, SpecDraftTokens, SpecAccepted []string
	SpecAcceptLength, SpecAcceptRate          []string

	// Histogram families.
	TTFT, ITL, TPOT, E2E, QueueTime []string
}

// VLLM: vLLM's V1 engine, names confirmed in vllm-project/vllm
// vllm/v1/metrics/loggers.py (PrometheusStatLogger). Older names last:
// vllm:gpu_cache_usage_perc and vllm:gpu_prefix_cache_* were deprecated in
// 0.9; vllm:time_per_output_token_seconds is the per-token gap later
// renamed vllm:inter_token_latency_seconds.
var VLLM = Names{
	Server:           "vllm",
	Running:          []string{"vllm:num_requests_running"},
	Waiting:          []string{"vllm:num_requests_waiting"},
	KVCacheUsage:     []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
	Preemptions:      []string{"vllm:num_preemptions_total"},
	PromptTokens:     []string{"vllm:prompt_tokens_total"},
	GenerationTokens: []string{"vllm:generation_tokens_total"},
	PrefixQueries:    []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"},
	PrefixHits:       []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"},
	Requests:         []string{"vllm:request_success_total"},
	// vllm/v1/spec_decode/metrics.py (SpecDecodingProm).
	SpecDrafts:      []string{"vllm:spec_decode_num_drafts_total"},
	SpecDraftTokens: []string{"vllm:spec_decode_num_draft_tokens_total"},
	SpecAccepted:    []string{"vllm:spec_decode_num_accepted_tokens_total"},
	TTFT:            []string{"vllm:time_to_first_token_seconds"},
	ITL:             []string{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
	E2E:             []string{"vllm:e2e_request_latency_seconds"},
	QueueTime:       []string{"vllm:request_queue_time_seconds"},
}

// SGLang: names confirmed in sgl-project/sglang
// python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector,
// TokenizerMetricsCollector). SGLang counts preemptions as retractions,
// and has no prefix-cache query counter: prompt_tokens_total (whole
// prompts, cached part included) and cached_tokens_total stand in.
var SGLang = Names{
	Server:           "sglang",
	Running:          []string{"sglang:num_running_reqs"},
	Waiting:          []string{"sglang:num_queue_reqs"},
	KVCacheUsage:     []string{"sglang:token_usage"},
	Preemptions:      []string{"sglang:num_retracted_requests_total"},
	PromptTokens:     []string{"sglang:prompt_tokens_total"},
	GenerationTokens: []string{"sglang:generation_tokens_total"},
	PrefixQueries:    []string{"sglang:prompt_tokens_total"},
	PrefixHits:       []string{"sglang:cached_tokens_total"},
	Requests:         []string{"sglang:num_requests_total"},
	// Gauges over the last logging interval: the mean accepted length,
	// and (newer versions) the acceptance rate.
	SpecAcceptLength: []string{"sglang:spec_accept_length"},
	SpecAcceptRate:   []string{"sglang:spec_accept_rate"},
	TTFT:             []string{"sglang:time_to_first_token_seconds"},
	ITL:              []string{"sglang:inter_token_latency_seconds"},
	E2E:              []string{"sglang:e2e_request_latency_seconds"},
	QueueTime:        []string{"sglang:queue_time_seconds"},
}

// TGI: names confirmed in huggingface/text-generation-inference
// docs/source/reference/metrics.md. TGI has no KV-cache, preemption,
// prefix-cache or TTFT metric; its token counts are the _sum of per-request
// histograms (so they grow when a request finishes), and its time per
// token is a per-request mean (TPOT), not a per-token gap.
var TGI = Names{
	Server:           "tgi",
	Running:          []string{"tgi_batch_current_size"},
	Waiting:          []string{"tgi_queue_size"},
	PromptTokens:     []string{"tgi_request_input_length_sum"},
	GenerationTokens: []string{"tgi_request_generated_tokens_sum"},
	Requests:         []string{"tgi_request_success"},
	TPOT:             []string{"tgi_request_mean_time_per_token_duration"},
	E2E:              []string{"tgi_request_duration"},
	QueueTime:        []string{"tgi_request_queue_duration"},
}

// Servers are the name sets Summarize recognises, tried in order.
var Servers = []Names{VLLM, SGLang, TGI}

// all lists every name of n, histogram families as their _count samples.
func (n Names) all() []string {
	var out []string
	for _, l := range [][]string{n.Running, n.Waiting, n.KVCacheUsage, n.Preemptions, n.PromptTokens,
		n.GenerationTokens, n.PrefixQueries, n.PrefixHits, n.Requests, n.SpecDrafts, n.SpecDraftTokens, n.SpecAccepted, n.SpecAcceptLength, n.SpecAcceptRate} {
		out = append(out, l...)
	}
	for _, l := range [][]string{n.TTFT, n.ITL, n.TPOT, n.E2E, n.QueueTime} {
		for _, f := range l {
			out = append(out, f+"_count")
		}
	}
	return out
}

// Detect returns the name set with the most names present at target, and
// false when none is.
func (d *Data) Detect(target string) (Names, bool) {
	best, bestN := Names{}, 0
	for _, n := range Servers {
		k := 0
		for _, name := range n.all() {
			if len(d.Find(target, name)) > 0 {
				k++
			}
		}
		if k > bestN {
			best, bestN = n, k
		}
	}
	return best, bestN > 0
}

// DCGM: NVIDIA's dcgm-exporter, names and units from its
// etc/default-counters.csv. Energy is read from any target that exports
// it, whatever server (if any) it is.
const (
	// DCGMEnergy is a counter per GPU: energy since boot, in mJ.
	DCGMEnergy = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
	// DCGMPower is a gauge per GPU: power draw, in W.
	DCGMPower = "DCGM_FI_DEV_POWER_USAGE"
)
