package resultschema

import "reflect"

// fieldDocs describes fields whose Go comment does not, keyed
// "Type.json_key"; it wins over the comment.
var fieldDocs = map[string]string{}

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
