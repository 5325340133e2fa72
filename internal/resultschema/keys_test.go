package resultschema

import "reflect"

// fieldDocs describes fields whose Go comment does not, keyed
// "package.Type.json_key"; it wins over the comment.
var fieldDocs = map[string]string{
	"analyze.Summary.files":                   "The recordings analyzed, with their run metadata.",
	"analyze.Summary.tokenizer":               "The tokenizer of the trace's token counts, from the run metadata.",
	"analyze.Summary.burstiness":              "The trace's burstiness (gamma shape of its arrival gaps; vLLM's --burstiness).",
	"analyze.Summary.start_wall_ns":           "The run's wall-clock start, Unix nanoseconds.",
	"analyze.Summary.excluded_warmup":         "Warm-up requests left out (without --include-warmup).",
	"analyze.Summary.excluded_by_window":      "Requests left out by --window.",
	"analyze.Summary.completed":               "Successful requests (vLLM's completed).",
	"analyze.Summary.total_input_tokens":      "Input tokens of the completed requests (vLLM's).",
	"analyze.Summary.total_output_tokens":     "Output tokens of the completed requests (vLLM's).",
	"analyze.Summary.request_throughput":      "Completed requests per second of duration_s (vLLM's).",
	"analyze.Summary.good_completed":          "Completed requests meeting every --goodput limit.",
	"analyze.Summary.request_goodput":         "good_completed per second of duration_s (vLLM's request_goodput); 0 without --goodput.",
	"analyze.Summary.output_throughput":       "Output tokens per second of duration_s (vLLM's).",
	"analyze.Summary.total_token_throughput":  "Input plus output tokens per second of duration_s (vLLM's).",
	"analyze.Summary.max_output_tokens_per_s": "Most output tokens in one 1 s bin of the run (vLLM's peak output throughput).",
	"analyze.Summary.max_concurrent_requests": "Most requests in flight at once (vLLM's peak concurrent requests).",
	"analyze.Summary.tpot":                    "Time per output token, (E2EL - TTFT) / (output tokens - 1), over the streams with more than one output token (vLLM's TPOT), ms.",
	"analyze.Summary.e2el":                    "End-to-end latency of the completed requests, start to last event (vLLM's E2EL), ms.",
	"analyze.Summary.itl_per_token":           "ITL per token: each event gap divided by the tokens the event carried, ms.",
	"analyze.Summary.itl_request_mean":        "ITL as each request's mean gap, one sample per request, ms.",
	"analyze.Summary.itl_first_content":       "ITL from the first content event on (the role-only first chunk left out), ms.",
	"analyze.Summary.corrected_e2el":          "E2EL measured from the intended send time (coordinated omission corrected), ms.",
	"analyze.Summary.queue":                   "Queue time: slot_ns - intended_ns, the wait for a concurrency slot and the schedule's lag, ms.",
	"analyze.Summary.send_delay":              "Send delay: sent_ns - slot_ns, building and writing the request, ms.",
	"analyze.Summary.health":                  "Each recording's client health figures and verdicts.",
	"analyze.Summary.errors_by_kind":          "Failed requests by error kind, with the first message of each.",
	"analyze.Summary.cached_tokens":           "Prefix-cache hits from usage.prompt_tokens_details.cached_tokens: run totals and the per-request and per-session hit-rate distributions.",
	"analyze.Summary.per_turn":                "Figures per turn index of the conversations.",
	"analyze.Summary.multi_turn":              "vLLM multi-turn benchmark's statistics table.",
	"analyze.Summary.time_series":             "Per-second series of the run (throughput, in flight, latency).",
	"analyze.Stats.count":                     "Samples.",
	"analyze.Stats.mean_ms":                   "Mean, ms.",
	"analyze.Stats.median_ms":                 "Median (numpy's linear percentile 50), ms.",
	"analyze.Stats.min_ms":                    "Smallest sample, ms.",
	"analyze.Stats.max_ms":                    "Largest sample, ms.",
	"analyze.Values.count":                    "Samples.",
	"analyze.Values.mean":                     "Mean, in the figure's unit.",
	"analyze.Values.median":                   "Median, in the figure's unit.",
	"analyze.Values.std":                      "Population standard deviation, in the figure's unit.",
	"analyze.Values.min":                      "Smallest sample.",
	"analyze.Values.max":                      "Largest sample.",
	"analyze.Values.percentiles":              "The --percentiles values, in their order.",
	"analyze.Pct.p":                           "The percentile (99 for p99).",
	"analyze.Pct.value_ms":                    "Its value, ms.",
	"analyze.ValuePct.p":                      "The percentile (99 for p99).",
	"analyze.ValuePct.value":                  "Its value, in the figure's unit.",
	"analyze.PValue.p":                        "The percentile.",
	"analyze.PValue.v":                        "Its value.",
	"analyze.RunSet.runs":                     "The recordings of the set, one per run, in run order.",
	"analyze.RunSet.confidence":               "Confidence level of the intervals (--confidence).",
	"analyze.RunSet.metrics":                  "Each metric across the runs.",
	"analyze.RunSet.note":                     "Says when the runs are too few to claim anything (one run: no interval; two: one degree of freedom).",
	"analyze.RunStat.name":                    "The metric as the report labels it (\"P99 TTFT (ms)\").",
	"analyze.RunStat.values":                  "Each run's value, in run order.",
	"analyze.RunStat.mean":                    "Mean of values.",
	"analyze.RunStat.min":                     "Smallest of values.",
	"analyze.RunStat.max":                     "Largest of values.",
	"analyze.GateVerdict.passed":              "False when any --fail-on condition held (compare then exits 1).",
	"analyze.GateVerdict.base":                "The baseline argument (A), as given.",
	"analyze.GateVerdict.new":                 "The candidate argument (B), as given.",
	"analyze.GateVerdict.conditions":          "Each --fail-on condition with its values and outcome, in the order given.",
	"analyze.GateOutcome.a":                   "The metric on A (a run set: the mean across runs).",
	"analyze.GateOutcome.b":                   "The metric on B.",
	"analyze.GateOutcome.change":              "B - A, relative in % for a relative condition; null when infinite (a relative change from 0).",
	"analyze.GateOutcome.change_text":         "The change as printed (\"+12.00%\", \"+inf%\").",
	"analyze.GateOutcome.failed":              "The condition held: the change passed its threshold (and with --beyond-ci cleared both intervals).",
	"analyze.CacheStats.requests_reporting":   "Requests whose response reported cached tokens.",
	"analyze.CacheStats.cached_tokens":        "Cached prompt tokens of the reporting requests.",
	"analyze.ErrorCount.kind":                 "The error kind (trace's error_kind: http_5xx, timeout, ...).",
	"analyze.ErrorCount.count":                "Requests that failed with it.",
	"analyze.FileInfo.path":                   "The recording's path, as given.",
	"analyze.FileInfo.rows":                   "Its rows (request attempts).",
	"analyze.FileInfo.run_meta":               "Its run metadata (trace.RunMeta).",
	"sweep.Summary.tracekit_version":          "The tracekit version that ran the sweep.",
	"sweep.Summary.info":                      "The sweep's setup: command, trace, targets, per-step settings.",
	"sweep.Summary.plan":                      "The swept axis and the ladder or search.",
	"sweep.Summary.criteria":                  "What a passing step meets: SLO objectives, goodput target, error rate, client health limits.",
	"sweep.Summary.steps":                     "Every step run, in order.",
	"sweep.Summary.knee":                      "Where the throughput curve flattens; absent when no step qualifies.",
	"sweep.Summary.interrupted":               "A signal ended the sweep; the steps are those that finished.",
	"sweep.Summary.error":                     "Why the sweep stopped early, when it did.",
	"sweep.StepResult.step":                   "The step's number, from 1.",
	"sweep.StepResult.load":                   "The step's load on the swept axis.",
	"sweep.StepResult.completed":              "Successful requests.",
	"sweep.StepResult.failed":                 "Failed requests (canceled ones included).",
	"sweep.StepResult.request_throughput":     "Completed requests per second of the step's duration (vLLM's).",
	"sweep.StepResult.output_throughput":      "Output tokens per second of the step's duration (vLLM's).",
	"sweep.StepResult.total_token_throughput": "Input plus output tokens per second (vLLM's).",
	"sweep.StepResult.ttft":                   "TTFT percentiles of the step, ms.",
	"sweep.StepResult.tpot":                   "TPOT percentiles of the step, ms.",
	"sweep.StepResult.itl":                    "ITL percentiles of the step, ms.",
	"sweep.StepResult.e2el":                   "E2EL percentiles of the step, ms.",
	"sweep.StepResult.sched_latency_p99_ms":   "p99 of the client's scheduler latency during the step, ms.",
	"sweep.StepResult.send_delay_p99_ms":      "p99 of the client's send delay (sent - slot), ms.",
	"sweep.StepResult.health_warnings":        "The client health checks that warned.",
	"sweep.StepResult.distorted":              "The client could not drive the step faithfully (over --max-client-lag or --max-client-cpu): no verdict on the load.",
	"sweep.StepResult.distortions":            "What distorted it, naming the figure and its limit.",
	"sweep.StepResult.interrupted":            "A signal cut the step short.",
	"sweep.StepResult.notes":                  "Remarks on the step (cut short, drain, trace ended).",
	"sweep.StepResult.wall_s":                 "Wall-clock seconds the step took, analysis included.",
	"sweep.StepResult.pass":                   "The step met every criterion.",
	"sweep.StepResult.verdict":                "pass, fail or distorted.",
	"sweep.StepResult.reasons":                "Why it failed: each criterion missed, with its value and limit.",
	"sweep.Dist.mean_ms":                      "Mean, ms.",
	"sweep.Dist.median_ms":                    "Median, ms.",
	"sweep.Dist.p50_ms":                       "50th percentile, ms.",
	"sweep.Dist.p90_ms":                       "90th percentile, ms.",
	"sweep.Dist.p99_ms":                       "99th percentile, ms.",
	"sweep.Check.metric":                      "The objective's metric: ttft, tpot, itl or e2el.",
	"sweep.Check.p":                           "The objective's percentile.",
	"sweep.Check.threshold_ms":                "The objective's limit, ms.",
	"sweep.Check.samples":                     "Samples the percentile was read from.",
	"sweep.Check.met":                         "value_ms is at most threshold_ms.",
	"sweep.Knee.step":                         "The knee's step.",
	"sweep.Knee.load":                         "Its load on the swept axis.",
	"sweep.Knee.offered_conv_rate":            "Its offered conversation start rate per second (0 in closed loop).",
	"sweep.Knee.throughput":                   "Its steady throughput, requests per second.",
	"sweep.Knee.max_throughput":               "The highest steady throughput of an undistorted step run to its end.",
	"sweep.Knee.reached":                      "A higher-load step past the knee shows the curve flattening.",
}

func typ(t string) map[string]any { return map[string]any{"type": t} }

func orNull(t string) map[string]any { return map[string]any{"type": []any{t, "null"}} }

func arrayOf(items any) map[string]any { return map[string]any{"type": "array", "items": items} }

func prop(s map[string]any, desc string) any { return withDescription(s, desc) }

// selectionSchema is analyze's "selection": the options the figures were
// computed under.
func selectionSchema(g *generator) any {
	return map[string]any{
		"type":                 "object",
		"description":          "The options the figures were computed under (analyze's flags).",
		"additionalProperties": false,
		"required":             []string{"window", "include_warmup", "itl", "success", "start", "percentiles", "metrics", "goodput", "hist_rel_err"},
		"properties": map[string]any{
			"window":         prop(typ("string"), "--window: the send-time window of the analyzed requests, as given (empty: the whole run)."),
			"include_warmup": prop(typ("boolean"), "--include-warmup: warm-up requests were analyzed too."),
			"itl":            prop(typ("string"), "--itl: the inter-token latency definition of the headline ITL."),
			"success":        prop(typ("string"), "--success: the rule that counts a request as completed."),
			"start":          prop(typ("string"), "--start: where the run's duration starts."),
			"percentiles":    prop(orNull("array"), "--percentiles: the percentiles computed of each metric (vLLM's --metric-percentiles)."),
			"metrics":        prop(orNull("array"), "--metrics: the metrics with mean, median, std and percentiles in vLLM's block (vLLM's --percentile-metrics)."),
			"goodput":        withDescription(g.schema(reflect.TypeOf(goodputType)), "--goodput: the SLO limits in ms a good request meets (vLLM's --goodput); {} when not set."),
			"hist_rel_err":   prop(typ("number"), "Relative error of the percentiles of runs too large to keep every value (log-bucket histogram)."),
		},
	}
}

// vllmKeys are the keys of vLLM's --save-result analyze writes at the top
// level, with vLLM's meanings.
var vllmKeys = map[string]struct {
	s    map[string]any
	desc string
}{
	"date":                    {typ("string"), "The run's wall-clock start, YYYYMMDD-HHMMSS in local time (vLLM's)."},
	"endpoint_type":           {typ("string"), "vLLM's endpoint type; always openai-chat."},
	"backend":                 {typ("string"), "vLLM's backend; always openai-chat."},
	"label":                   {typ("null"), "vLLM's --label; always null."},
	"model_id":                {orNull("string"), "The model the run asked for, null when not recorded."},
	"tokenizer_id":            {orNull("string"), "The tokenizer of the trace's token counts, null when not recorded."},
	"num_prompts":             {typ("integer"), "Requests sent (vLLM's: analyzed requests that were sent)."},
	"request_rate":            {map[string]any{"type": []any{"number", "string"}}, "The trace's request rate in requests/s, or \"inf\" when unlimited (vLLM's)."},
	"burstiness":              {typ("number"), "The trace's burstiness: gamma shape of its arrival gaps (vLLM's --burstiness)."},
	"max_concurrency":         {orNull("integer"), "replay --max-concurrency, null when unlimited."},
	"duration":                {typ("number"), "Benchmark duration in seconds (vLLM's)."},
	"completed":               {typ("integer"), "Successful requests (vLLM's)."},
	"failed":                  {typ("integer"), "Requests sent and not completed (vLLM's; client cancellations included)."},
	"total_input_tokens":      {typ("integer"), "Input tokens of the completed requests (vLLM's)."},
	"total_output_tokens":     {typ("integer"), "Output tokens of the completed requests (vLLM's)."},
	"request_throughput":      {typ("number"), "Completed requests per second of duration (vLLM's)."},
	"request_goodput":         {orNull("number"), "Good requests (meeting --goodput) per second; null without --goodput (vLLM's)."},
	"output_throughput":       {typ("number"), "Output tokens per second of duration (vLLM's)."},
	"total_token_throughput":  {typ("number"), "Input plus output tokens per second of duration (vLLM's)."},
	"max_output_tokens_per_s": {typ("number"), "Highest output tokens in one second of the run (vLLM's)."},
	"max_concurrent_requests": {typ("integer"), "Most requests in flight at once (vLLM's)."},
	"latencies":               {arrayOf(typ("number")), "Per request sent, in file order: E2EL in seconds of a success, 0 for a failure (vLLM's)."},
	"queue_times":             {arrayOf(typ("number")), "Per request sent: start minus intended send time in seconds (vLLM's semaphore wait; here also dispatch lag)."},
	"rtfx":                    {typ("number"), "vLLM's real-time factor of audio; always 0."},
	"input_lens":              {arrayOf(typ("integer")), "--json-detailed: per request sent, usage.prompt_tokens (else the client's count)."},
	"output_lens":             {arrayOf(typ("integer")), "--json-detailed: per request sent, output tokens (0 for a failure)."},
	"start_times":             {arrayOf(typ("number")), "--json-detailed: per request sent, its start in seconds from the run start."},
	"ttfts":                   {arrayOf(typ("number")), "--json-detailed: per request sent, TTFT in seconds (0 without a stream)."},
	"itls":                    {arrayOf(arrayOf(typ("number"))), "--json-detailed: per request sent, its event gaps in seconds."},
	"errors":                  {arrayOf(typ("string")), "--json-detailed: per request sent, \"\" for a success, else its error."},
}

// detailedKeys are written only with --json-detailed.
var detailedKeys = map[string]bool{"input_lens": true, "output_lens": true, "start_times": true, "ttfts": true, "itls": true, "errors": true}

// analyzeSchema is analyze --json: vLLM's --save-result keys, the
// metric statistics vLLM names STAT_METRIC_ms, then tracekit's figures
// under "tracekit".
func analyzeSchema(summary any) any {
	props, required := map[string]any{}, []string{}
	for k, v := range vllmKeys {
		props[k] = prop(v.s, v.desc)
		if !detailedKeys[k] {
			required = append(required, k)
		}
	}
	props["tracekit"] = withDescription(summary, "tracekit's figures beyond vLLM's, and the options they were computed under (selection).")
	required = append(required, "tracekit")
	sortStrings(required)
	return map[string]any{
		"type":        "object",
		"description": "analyze --json: vLLM's bench serve --save-result (with --json-detailed its --save-detailed lists), plus tracekit's figures under \"tracekit\".",
		"properties":  props,
		"patternProperties": map[string]any{
			`^(mean|median|std|p(100|[1-9]?[0-9])(\.[0-9]+)?)_(ttft|tpot|itl|e2el)_ms$`: prop(typ("number"),
				"vLLM's STAT_METRIC_ms: the mean, median, standard deviation or a --percentiles percentile (p99, p99.9) of each --metrics metric in ms."),
		},
		"additionalProperties": false,
		"required":             required,
	}
}
