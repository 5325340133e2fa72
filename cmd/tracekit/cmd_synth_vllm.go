package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/trace"
)

// vllmCommand is a vllm bench serve command line read by --from-vllm:
// the synth flags it sets and the replay and analyze flags that send the
// trace as vLLM would.
type vllmCommand struct {
	synth    [][2]string // synth flag, value (in the order read)
	replay   []string    // replay arguments
	analyze  []string    // analyze arguments
	target   string
	endpoint string   // the API, a trace.Endpoints name
	noted    []string // flags accepted with no effect on the workload
	dropped  []string // values vLLM accepts that tracekit leaves out, and why
}

// vllmIgnorable change vLLM's own output files or logging only; the
// value says whether the flag takes a value.
var vllmIgnorable = map[string]bool{"save-result": false, "save-detailed": false, "append-result": false, "result-dir": true,
	"result-filename": true, "label": true, "disable-tqdm": false, "trust-remote-code": false, "metadata": true,
	"plot-timeline": false, "plot-dataset-stats": false, "timeline-itl-thresholds": true}

// vllmBool are vLLM's flags that take no value.
var vllmBool = map[string]bool{"ignore-eos": true, "no-oversample": true, "disable-shuffle": true, "no-reranker": true}

// vllmBackends maps vllm bench serve's --backend choices (ASYNC_REQUEST_FUNCS
// in vllm/benchmarks/lib/endpoint_request_func.py) to the API tracekit sends;
// a backend with no API is refused with the reason. "" is vLLM's default,
// openai.
var vllmBackends = map[string]struct{ api, refused string }{
	"":                          {api: trace.EndpointCompletions},
	"openai":                    {api: trace.EndpointCompletions},
	"vllm":                      {api: trace.EndpointCompletions},
	"openai-chat":               {api: trace.EndpointChat},
	"openai-embeddings":         {api: trace.EndpointEmbeddings},
	"vllm-rerank":               {api: trace.EndpointRerank},
	"openai-audio":              {refused: "audio transcription; tracekit sends text APIs only"},
	"openai-embeddings-chat":    {refused: "chat-format (multimodal) embeddings; tracekit sends /v1/embeddings with text inputs (--backend openai-embeddings)"},
	"openai-embeddings-clip":    {refused: "image embeddings; tracekit sends text inputs (--backend openai-embeddings)"},
	"openai-embeddings-vlm2vec": {refused: "multimodal embeddings; tracekit sends text inputs (--backend openai-embeddings)"},
	"infinity-embeddings":       {refused: "the Infinity server's own API; tracekit sends OpenAI /v1/embeddings (--backend openai-embeddings)"},
	"infinity-embeddings-clip":  {refused: "the Infinity server's image embeddings; tracekit sends text inputs"},
	"vllm-pooling":              {refused: "vLLM's /pooling API, which tracekit does not send (embeddings: --backend openai-embeddings)"},
}

// vllmEndpointPaths maps vLLM's --endpoint paths to APIs.
var vllmEndpointPaths = map[string]string{
	"/v1/completions": trace.EndpointCompletions, "/v1/chat/completions": trace.EndpointChat,
	"/v1/embeddings": trace.EndpointEmbeddings, "/rerank": trace.EndpointRerank, "/v1/rerank": trace.EndpointRerank,
	"/v2/rerank": trace.EndpointRerank, "/score": trace.EndpointScore, "/v1/score": trace.EndpointScore,
}

// vllmForkFlags are flags of vllm bench serve's forks, not vLLM's: what
// to give instead.
var vllmForkFlags = map[string]string{
	"sharegpt-input-len":         "vLLM's sharegpt dataset takes prompt lengths from the data: filter them with tracekit synth --source sharegpt --input-tokens MIN-MAX, or use --dataset-name random --random-input-len",
	"max-connections-per-worker": "cap requests in flight with --max-concurrency (tracekit replay --max-concurrency)",
}

// vllmKnown are the flags parseVLLMCommand reads (their values are
// required); any other takes the next word as its value unless it is a
// flag.
var vllmKnown = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`dataset-name dataset-path num-prompts seed sharegpt-output-len random-input-len
		random-output-len random-range-ratio random-prefix-len random-batch-size burstiness input-len output-len
		request-rate max-concurrency ready-check-timeout-sec model served-model-name temperature base-url host port
		endpoint backend tokenizer percentile-metrics metric-percentiles
		random-mm-base-items-per-request random-mm-num-mm-items-range-ratio random-mm-limit-mm-per-prompt
		random-mm-bucket-config custom-output-len ramp-up-strategy ramp-up-start-rps ramp-up-end-rps`) {
		vllmKnown[n] = true
	}
	for n := range vllmIgnorable {
		vllmKnown[n] = true
	}
	for n := range vllmBool {
		vllmKnown[n] = true
	}
}

// vllmDatasets are the --dataset-name values tracekit reads.
var vllmDatasets = map[string]bool{"sharegpt": true, "random": true, "random-mm": true, "random-rerank": true,
	"custom_mm": true, "custom_image": true}

// parseVLLMCommand reads line, a vllm bench serve (or benchmark_serving.py)
// command line. Words before the first flag (vllm bench serve, python
// benchmarks/benchmark_serving.py) are skipped. Every flag tracekit cannot
// honour is named in one error.
func parseVLLMCommand(line string) (*vllmCommand, error) {
	words, err := shellWords(line)
	if err != nil {
		return nil, err
	}
	for len(words) > 0 && !strings.HasPrefix(words[0], "-") {
		words = words[1:]
	}
	c := &vllmCommand{}
	host, port, endpoint, backend, dataset := "127.0.0.1", "8000", "", "", "random"
	var goodput, refused []string
	refuse := func(format string, args ...any) { refused = append(refused, fmt.Sprintf(format, args...)) }
	vals := map[string]string{} // dataset shape flags, read once the dataset and API are known
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "--") {
			return nil, fmt.Errorf("%q: expected a --flag", w)
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		name = strings.ReplaceAll(name, "_", "-")
		takesValue := !vllmBool[name]
		if ig, ok := vllmIgnorable[name]; ok {
			takesValue = ig
		}
		if !vllmKnown[name] && (i+1 >= len(words) || strings.HasPrefix(words[i+1], "--")) {
			takesValue = false // a flag refused below: a value only if one follows
		}
		if takesValue && !hasVal && name != "goodput" && name != "metadata" {
			if i+1 >= len(words) {
				return nil, fmt.Errorf("--%s: missing its value", name)
			}
			i++
			val = words[i]
		}
		switch name {
		case "dataset-name":
			if !vllmDatasets[val] {
				refuse("--dataset-name %s: tracekit reads vLLM's sharegpt, random, random-mm, random-rerank and custom_mm (custom_image) datasets only", val)
			}
			dataset = val
		case "dataset-path":
			c.synth = append(c.synth, [2]string{"input", val})
		case "num-prompts", "seed", "sharegpt-output-len", "random-input-len", "random-output-len", "random-range-ratio",
			"random-prefix-len", "random-batch-size", "burstiness", "input-len", "output-len",
			"random-mm-base-items-per-request", "random-mm-num-mm-items-range-ratio", "random-mm-limit-mm-per-prompt",
			"random-mm-bucket-config", "custom-output-len":
			vals[name] = val
		case "no-oversample", "disable-shuffle", "no-reranker":
			vals[name] = "true"
		case "ramp-up-strategy", "ramp-up-start-rps", "ramp-up-end-rps":
			vals[name] = val
		case "request-rate":
			if strings.EqualFold(val, "inf") {
				val = "0"
			}
			vals[name] = val
		case "max-concurrency":
			if _, err := strconv.Atoi(val); err != nil {
				refuse("--max-concurrency %q: want an integer", val)
			}
			c.replay = append(c.replay, "--max-concurrency", val)
		case "ready-check-timeout-sec":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				refuse("--ready-check-timeout-sec %q: want a whole number of seconds", val)
			}
			c.replay = append(c.replay, "--ready-timeout", strconv.Itoa(n)+"s")
		case "ignore-eos":
			vals[name] = "true"
		case "model", "served-model-name":
			vals[name] = val
		case "temperature":
			c.replay = append(c.replay, "--temperature", val)
		case "base-url":
			c.target = val
		case "host":
			host = val
		case "port":
			port = val
		case "endpoint":
			endpoint = val
		case "backend":
			backend = val
		case "tokenizer":
			c.synth = append(c.synth, [2]string{"tokenizer", val})
		case "goodput", "metadata":
			var list []string
			if hasVal {
				list = append(list, val)
			}
			for i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++
				list = append(list, words[i])
			}
			if name == "goodput" {
				goodput = list
			} else {
				c.noted = append(c.noted, "--metadata")
			}
		case "percentile-metrics":
			vals[name] = val
		case "metric-percentiles":
			if _, err := analyze.ParsePercentiles(val); err != nil {
				refuse("--metric-percentiles %q: %v", val, err)
			}
			c.analyze = append(c.analyze, "--percentiles", val)
		default:
			if _, ok := vllmIgnorable[name]; ok {
				c.noted = append(c.noted, "--"+name)
				continue
			}
			if instead, ok := vllmForkFlags[name]; ok {
				refuse("--%s: not a vllm bench serve flag (a fork's): %s", name, instead)
				continue
			}
			refuse("--%s: tracekit cannot honour this vllm bench serve flag", name)
		}
	}

	// the API: the backend's, which --endpoint must agree with (vLLM
	// refuses a URL its backend does not post to)
	b, known := vllmBackends[backend]
	switch {
	case !known:
		refuse("--backend %s: not a vllm bench serve backend tracekit knows (openai, vllm, openai-chat, openai-embeddings, vllm-rerank)", backend)
	case b.refused != "":
		refuse("--backend %s: %s", backend, b.refused)
	default:
		c.endpoint = b.api
	}
	if endpoint != "" {
		api, ok := vllmEndpointPaths[endpoint]
		switch {
		case !ok:
			refuse("--endpoint %s: tracekit sends %s", endpoint, strings.Join(sortedKeys(vllmEndpointPaths), ", "))
		case api == trace.EndpointScore:
			refuse("--endpoint %s: vllm bench serve has no score backend (tracekit synth --endpoint score makes score requests)", endpoint)
		case c.endpoint != "" && api != c.endpoint && !(backend == "" && api == trace.EndpointChat):
			refuse("--endpoint %s with --backend %s: vLLM posts that backend's requests to its own API (%s)", endpoint, backendName(backend), c.endpoint)
		case backend == "" && api == trace.EndpointChat:
			c.endpoint = api // older benchmark_serving.py chose the API by path
		}
	}

	c.dataset(dataset, vals, refuse)
	if len(goodput) > 0 {
		c.analyze = append(c.analyze, "--goodput", strings.Join(goodput, ","))
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("cannot honour %d flag(s) of the vllm bench serve command line: %s", len(refused), strings.Join(refused, "; "))
	}
	if c.target == "" {
		c.target = "http://" + host + ":" + port
	}
	c.replay = append([]string{"--target", c.target, "--endpoint", c.endpoint}, c.replay...)
	return c, nil
}

// dataset turns the dataset's flags (vals) into synth flags for the API,
// and the flags vLLM's main applies (--input-len, --output-len, its
// forced --ignore-eos, its default percentile metrics) into replay and
// analyze flags.
func (c *vllmCommand) dataset(name string, vals map[string]string, refuse func(string, ...any)) {
	set := func(k, v string) { c.synth = append(c.synth, [2]string{k, v}) }
	// vLLM maps the general lengths onto every dataset's own
	if v, ok := vals["input-len"]; ok {
		vals["random-input-len"] = v
	}
	if v, ok := vals["output-len"]; ok {
		vals["random-output-len"], vals["sharegpt-output-len"] = v, v
	}
	for _, k := range []string{"seed", "burstiness"} {
		if v, ok := vals[k]; ok {
			set(k, v)
		}
	}
	if v, ok := vals["request-rate"]; ok {
		set("rate", v)
	}
	// vLLM ramps over the request index from the start to the end rate
	// (its request rate then unused): tracekit's ramp over the
	// conversations, without --rate-ramp-duration, is that ramp.
	if s, ok := vals["ramp-up-strategy"]; ok {
		start, okS := vals["ramp-up-start-rps"]
		end, okE := vals["ramp-up-end-rps"]
		if !okS || !okE {
			refuse("--ramp-up-strategy needs --ramp-up-start-rps and --ramp-up-end-rps, as vLLM requires")
		}
		set("rate-ramp", s)
		set("rate-ramp-start", start)
		set("rate", end)
	} else if _, ok := vals["ramp-up-start-rps"]; ok {
		refuse("--ramp-up-start-rps without --ramp-up-strategy")
	} else if _, ok := vals["ramp-up-end-rps"]; ok {
		refuse("--ramp-up-end-rps without --ramp-up-strategy")
	}
	if v, ok := vals["model"]; ok {
		c.replay = append(c.replay, "--model", v)
	}
	if v, ok := vals["served-model-name"]; ok {
		c.replay = append(c.replay, "--model", v)
	}
	pooling := c.endpoint != "" && !trace.Generates(c.endpoint)
	only := func(flags []string, what string) {
		for _, f := range flags {
			if _, ok := vals[f]; ok {
				refuse("--%s: %s", f, what)
			}
		}
	}
	if name != "random-mm" {
		only(randomMMFlags, "for --dataset-name random-mm only")
	}
	prompts := 1000 // vLLM's --num-prompts default
	if v, ok := vals["num-prompts"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			refuse("--num-prompts %q: want a whole number above 0", v)
		}
		prompts = n
	}
	switch {
	case c.endpoint == "":
		// the backend was refused: the dataset's flags are not checked
	case !pooling:
		switch name {
		case "sharegpt":
			set("source", "vllm-sharegpt")
			for _, k := range []string{"sharegpt-output-len", "no-oversample", "disable-shuffle"} {
				if v, ok := vals[k]; ok {
					set(k, v)
				}
			}
			only([]string{"random-input-len", "random-output-len", "random-range-ratio", "random-prefix-len", "random-batch-size"}, "a random dataset flag, not read by --dataset-name sharegpt")
		case "random", "random-mm":
			set("source", "vllm-random")
			if name == "random-mm" {
				if c.endpoint != trace.EndpointChat {
					refuse("--dataset-name random-mm: vLLM sends its images and videos on --backend openai-chat (/v1/chat/completions), not on %s", c.endpoint)
				}
				// the items per request always, so synth draws them
				// even when every random-mm flag is vLLM's default
				if _, ok := vals[randomMMFlags[0]]; !ok {
					vals[randomMMFlags[0]] = "1"
				}
				for _, k := range randomMMFlags {
					if v, ok := vals[k]; ok {
						set(k, v)
					}
				}
			}
			for _, k := range []string{"random-input-len", "random-output-len", "random-range-ratio", "random-prefix-len"} {
				if v, ok := vals[k]; ok {
					set(k, v)
				}
			}
			only([]string{"random-batch-size"}, "batches are for --backend openai-embeddings")
			// vLLM's main: the random datasets on an OpenAI-compatible
			// backend always ignore EOS, so generation runs to the length
			vals["ignore-eos"] = "true"
		case "random-rerank":
			refuse("--dataset-name random-rerank: reranking requests; give --backend vllm-rerank")
		case "custom_mm", "custom_image":
			set("source", "vllm-custom-mm")
			if c.endpoint != trace.EndpointChat {
				refuse("--dataset-name %s: vLLM sends its images on --backend openai-chat (/v1/chat/completions), not on %s", name, c.endpoint)
			}
			for _, k := range []string{"custom-output-len", "no-oversample", "disable-shuffle"} {
				if v, ok := vals[k]; ok {
					set(k, v)
				}
			}
			only([]string{"random-input-len", "random-output-len", "random-range-ratio", "random-prefix-len", "random-batch-size", "sharegpt-output-len"}, "not read by --dataset-name "+name)
		}
		if name != "custom_mm" && name != "custom_image" {
			only([]string{"custom-output-len"}, "for --dataset-name custom_mm only")
		}
		if _, ok := vals["num-prompts"]; ok {
			set("conversations", strconv.Itoa(prompts))
		}
		only([]string{"no-reranker"}, "for --dataset-name random-rerank only")
		if vals["ignore-eos"] == "true" {
			c.replay = append(c.replay, "--ignore-eos")
		}
	case c.endpoint == trace.EndpointEmbeddings:
		if name != "random" {
			refuse("--dataset-name %s with --backend openai-embeddings: tracekit makes embeddings requests from the random dataset only", name)
		}
		inLo, inHi := vllmRange(vals, "random-input-len", 1024)
		batch := vllmInt(vals, "random-batch-size", 1, refuse)
		set("source", "synthetic")
		set("endpoint", trace.EndpointEmbeddings)
		set("input-tokens", rangeSpec(inLo, inHi))
		set("batch-size", strconv.Itoa(batch))
		// vLLM cuts --num-prompts inputs into batches: ceil(N/batch)
		// requests (its last batch may be smaller; here every one is full)
		set("conversations", strconv.Itoa((prompts+batch-1)/batch))
		only([]string{"random-prefix-len", "no-reranker"}, "not read for embeddings requests")
		c.noteUnused(vals, "random-output-len", "output-len", "sharegpt-output-len", "ignore-eos")
	case c.endpoint == trace.EndpointRerank:
		if name != "random-rerank" {
			refuse("--dataset-name %s with --backend vllm-rerank: tracekit makes rerank requests from the random-rerank dataset only", name)
		}
		if _, ok := vals["no-reranker"]; ok {
			refuse("--no-reranker: scoring with a model that does not rerank natively; tracekit sends /rerank requests of one query and its documents")
		}
		// RandomDatasetForReranking: a query of input_len/2 - 1 tokens
		// (one separator), documents of input_len - query - 1, both
		// around their lengths by the range ratio, batch documents per
		// query. vLLM draws the query once for every request; here each
		// request draws its own of the same length law.
		in := vllmInt(vals, "random-input-len", 1024, refuse)
		r := vllmRatio(vals, refuse)
		q := in/2 - 1
		d := in - q - 1
		batch := vllmInt(vals, "random-batch-size", 1, refuse)
		set("source", "synthetic")
		set("endpoint", trace.EndpointRerank)
		set("query-tokens", rangeSpec(lenRange(q, r)))
		set("document-tokens", rangeSpec(lenRange(d, r)))
		set("documents", strconv.Itoa(batch))
		set("conversations", strconv.Itoa((prompts+batch-1)/batch))
		only([]string{"random-prefix-len"}, "not read for rerank requests")
		c.noteUnused(vals, "random-output-len", "output-len", "sharegpt-output-len", "ignore-eos")
	}
	// the percentile metrics analyze reports: vLLM's defaults are
	// ttft,tpot,itl for generating backends and e2el for pooling ones
	if v, ok := vals["percentile-metrics"]; ok {
		var keep []string
		for _, m := range strings.Split(v, ",") {
			if _, err := analyze.ParseMetrics(m); err == nil && strings.TrimSpace(m) != "" {
				keep = append(keep, strings.TrimSpace(m))
			} else if m = strings.TrimSpace(m); m != "" {
				c.dropped = append(c.dropped, fmt.Sprintf("--percentile-metrics %s (not a metric tracekit analyze reports: ttft, tpot, itl, e2el)", m))
			}
		}
		if len(keep) > 0 {
			c.analyze = append(c.analyze, "--metrics", strings.Join(keep, ","))
		}
	} else if pooling {
		c.analyze = append(c.analyze, "--metrics", "e2el")
	}
}

func (c *vllmCommand) noteUnused(vals map[string]string, names ...string) {
	for _, n := range names {
		if _, ok := vals[n]; ok {
			c.noted = append(c.noted, "--"+n)
		}
	}
}

// vllmInt is the integer flag name of vals, def when not given.
func vllmInt(vals map[string]string, name string, def int, refuse func(string, ...any)) int {
	v, ok := vals[name]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		refuse("--%s %q: want a whole number above 0", name, v)
		return def
	}
	return n
}

func vllmRatio(vals map[string]string, refuse func(string, ...any)) float64 {
	v, ok := vals["random-range-ratio"]
	if !ok {
		return 0
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r >= 0 && r < 1) {
		refuse("--random-range-ratio %q: want 0 <= ratio < 1", v)
		return 0
	}
	return r
}

// vllmRange is the inclusive range vLLM's random dataset draws a length
// from: [floor(L*(1-r)), ceil(L*(1+r))].
func vllmRange(vals map[string]string, name string, def int) (lo, hi int) {
	n := def
	if v, err := strconv.Atoi(vals[name]); err == nil {
		n = v
	}
	r, _ := strconv.ParseFloat(vals["random-range-ratio"], 64)
	return lenRange(n, r)
}

func lenRange(n int, r float64) (lo, hi int) {
	return max(int(math.Floor(float64(n)*(1-r))), 1), max(int(math.Ceil(float64(n)*(1+r))), 1)
}

// rangeSpec is a synth distribution: N, or A-B uniform.
func rangeSpec(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

func backendName(b string) string {
	if b == "" {
		return "openai (the default)"
	}
	return b
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// apply sets the synth flags the command gives; a flag also given to
// synth itself keeps synth's value (so --tokenizer can replace a model id).
func (c *vllmCommand) apply(f *pflag.FlagSet) error {
	given := map[string]bool{}
	f.Visit(func(fl *pflag.Flag) { given[fl.Name] = true })
	if given["source"] {
		return errors.New("--from-vllm sets the source: leave --source out")
	}
	for _, kv := range c.synth {
		if given[kv[0]] {
			continue
		}
		if err := f.Set(kv[0], kv[1]); err != nil {
			return fmt.Errorf("--from-vllm: --%s %q: %w", kv[0], kv[1], err)
		}
	}
	return nil
}

// shellWords splits a command line as a POSIX shell would for plain
// words, single and double quotes, backslash escapes and line
// continuations; no expansion.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
				inWord = true
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("--from-vllm: unterminated ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`--from-vllm: unterminated " quote`)
			}
			inWord = true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
