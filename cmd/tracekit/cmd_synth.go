package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/internal/synth"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// newSynthCmd builds the synth command.
func newSynthCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "synth",
		Short: "Write a trace: synthetic conversations, ShareGPT, or an imported production trace",
		Long: `synth writes a trace (zstd Parquet, one row per request turn) for replay.

--turns counts user turns, that is requests, per conversation (vLLM's
num_turns counts user and assistant messages; --config converts it).
Conversations start on an open-loop schedule: gamma gaps with mean 1/--rate
and shape --burstiness (1.0 = Poisson), or all at once with --rate 0.
Open-loop arrival of later turns = previous arrival + --token-time x the
previous turn's output tokens + think time.

Sources:
` + sourceList() + `
` + synth.DistSyntax + `

The same seed and inputs give a byte-identical file when SOURCE_DATE_EPOCH
is set (it fixes the created_at metadata; otherwise it is the current time).`,
		Example: `  tracekit synth --conversations 2000 --turns 30-40 --input-tokens 200-400 \
      --output-tokens 100-200 --rate 5 --burstiness 1.0 -o trace.parquet
  tracekit synth --think-time lognormal:average=5s,median_ratio=0.85 \
      --prefix-tokens lognormal:average=1000,max=5000 --common-prefix-tokens 500
  tracekit synth --config generate_multi_turn.json --text-file pg1184.txt
  tracekit synth --source sharegpt --input ShareGPT_V3.json --conversations 500 --turns 2-20
  tracekit synth --agent --conversations 200 --rounds 2-6 --fan-out 1-4 --sub-agents 0-3 \
      --tool-latency lognormal:average=800ms --tool-result-tokens 100-600 --rate 2 -o agents.parquet
  tracekit synth --source otel --input ./otel_genai/ -o agents.parquet
  tracekit synth --tokenizer ./Llama-3.1-8B/tokenizer.json --seed 7
  tracekit synth --from-vllm 'vllm bench serve --dataset-name sharegpt --dataset-path sg.json --num-prompts 500 --request-rate 10'`,
		Args: cobra.NoArgs,
		RunE: runSynth,
	}
	declareSynthFlags(cmd.Flags())
	return cmd
}

// declareSynthFlags declares every synth flag: the common ones, then each
// source's (a flag several sources read is declared once).
func declareSynthFlags(f *pflag.FlagSet) {
	f.String("source", "synthetic", "where conversations come from: "+strings.Join(sourceNames(), ", "))
	f.String("input", "", "input file of the source (sharegpt JSON/JSONL, a production trace)")
	f.Int("conversations", 0, "conversations to write, at least 1 (default: 100 synthetic, all of a file)")
	f.Int64("seed", 0, "random seed; the same seed and inputs give the same trace")
	f.String("tokenizer", tokenizer.DefaultName, "token counting: o200k_base, cl100k_base, or a Hugging Face tokenizer.json path")
	f.String("text-file", "", "plain-text corpus for synthetic text (default: embedded generated prose)")
	f.StringP("output", "o", "trace.parquet", "trace file to write")
	f.Float64("rate", 0, "conversation starts per second; 0 or inf starts all at once")
	f.Float64("burstiness", 1.0, "gamma shape of start gaps: 1 Poisson, <1 burstier, >1 more regular")
	f.Duration("token-time", synth.DefaultTokenTime, "estimated time per output token for open-loop arrivals of later turns")
	f.Var(newSizeValue(synth.DefaultMaxBytes), "max-trace-size", "refuse to make a trace whose text is estimated above this size (e.g. 512MiB, 16GiB; 0 = no limit)")

	// synthetic; sharegpt reads --turns, --input-tokens and --output-tokens
	// as MIN-MAX filters, and --think-time.
	f.String("turns", synth.DefaultTurns, "user turns (requests) per conversation: a distribution; for sharegpt a MIN-MAX filter")
	f.String("input-tokens", synth.DefaultInputTokens, "tokens per user message: a distribution; for sharegpt a MIN-MAX filter")
	f.String("output-tokens", synth.DefaultOutputTokens, "max_tokens per turn (reference answer length): a distribution; for sharegpt a MIN-MAX filter")
	f.String("prefix-tokens", "0", "per-conversation prefix tokens (system message of turn 0): a distribution")
	f.String("common-prefix-tokens", "0", "prefix tokens shared by all conversations: a distribution drawn once")
	f.String("think-time", "0s", "user think time before turns 2..n: a distribution of durations, e.g. lognormal:average=5s")
	f.String("config", "", "vLLM multi-turn generation config JSON (generate_multi_turn.json); flags given explicitly override it")
	f.String("prefix-layout", "", "turn 0's prefixes: vllm (in the user message, the common prefix inside --input-tokens) or system (a system message on top of a full user message); default vllm with --config, else system")

	// agent sessions (--agent)
	f.Bool("agent", false, "synthetic agent sessions (same as --source agent): tool-calling rounds, parallel tool calls and sub-agent fan-outs as dependency graphs")
	f.String("rounds", synth.DefaultAgentRounds, "agent: tool-calling rounds per session (then one text answer): a distribution")
	f.String("fan-out", synth.DefaultAgentWidth, "agent: parallel tool calls per round: a distribution")
	f.String("sub-agents", "0", "agent: parallel LLM branches a round fans out to, joined by one request (0 or 1 = none): a distribution")
	f.String("sub-agent-context", synth.SubAgentsShared, "agent: shared (a branch continues the round's history and the join merges the branches') or own (a branch starts a fresh context, as an agent run as a tool; the join continues the round with the tool results and waits for the branches without taking their answers: wait-only edges)")
	f.String("tool-result-tokens", synth.DefaultAgentResultTokens, "agent: tokens per tool result: a distribution")
	f.String("tool-latency", synth.DefaultAgentToolLatency, "agent: time each tool call runs (a round waits for its slowest): a distribution of durations")
	f.String("system-tokens", synth.DefaultAgentSystemTokens, "agent: tokens of each session's system prompt: a distribution")
	f.Int("tools", 8, "agent: function definitions in every request's tools array")

	// the production-trace imports
	f.Duration("start", 0, "imported traces: start of the window on the trace's timeline")
	f.Duration("duration", 0, "imported traces: window length (0 = to the end)")
	f.Float64("speed", 1, "imported traces: time compression (2 = twice as fast)")
	f.Int("max-input-tokens", 0, "imported traces: clamp each prompt to this many tokens (0 = none)")
	f.Duration("max-idle", 0, "otel: shorten every stretch with no span open that is longer than this to this (exports collected days apart); 0 keeps the recorded times")
	f.Int("limit", 0, "imported traces: keep the first N conversations of the window (0 = all; default --conversations)")
	f.String("model", "", "imported traces: model name stamped on every request (default: replay's --model)")
	f.Bool("skip-bad", false, "imported traces: count and skip malformed rows instead of failing")
	f.Int("block-size", 0, "imported traces: tokens per hash_ids block (0 = the format's: mooncake 512, bailian 16)")
	f.Bool("prompt-text", false, "imported traces: store every prompt's text in the trace instead of virtual prompts (lengths, block hashes, a seed) that replay makes into the same text")
	f.Duration("group-window", synth.DefaultGroupWindow, "imported traces: rows may be out of time order by this much, and a session or chain idle this long is complete; memory holds this much of the file (widen it when synth says so)")

	// vLLM bench serve's datasets
	f.Int("sharegpt-output-len", 0, "vllm-sharegpt: max_tokens of every request (0 = the answer's length)")
	f.Bool("no-oversample", false, "vllm-sharegpt: keep fewer requests than --conversations when the file has fewer valid ones")
	f.Bool("disable-shuffle", false, "vllm-sharegpt: take records in file order")
	f.Int("random-input-len", 1024, "vllm-random: input tokens per request (around it with --random-range-ratio)")
	f.Int("random-output-len", 128, "vllm-random: output tokens per request")
	f.Float64("random-range-ratio", 0, "vllm-random: lengths uniform in [len*(1-r), len*(1+r)], 0 <= r < 1")
	f.Int("random-prefix-len", 0, "vllm-random: tokens of a prefix shared by every prompt, on top of the input length")
	f.String("from-vllm", "", "a vllm bench serve command line: write the equivalent trace and print the matching replay command")

	// burstgpt
	f.String("filter-model", "", "burstgpt: keep only rows of this Model (ChatGPT, GPT-4)")
	f.String("log-type", "", "burstgpt: keep only rows of this Log Type (conversation, api)")
	f.String("failed", synth.FailedDrop, "burstgpt: failed requests (0 response tokens): drop, keep or flag")
}

// synthSource is one --source: the flags it reads beyond the common ones
// (recorded in the trace's metadata with the values it used) and how it
// is built from them.
type synthSource struct {
	name, summary string
	// timed sources set their own arrivals; the others get the --rate
	// schedule.
	timed      bool
	needsInput bool
	flags      []string
	build      func(f *pflag.FlagSet, in sourceInputs) (synth.Source, error)
}

// sourceInputs is what every source may take besides its own flags.
type sourceInputs struct {
	input         string
	conversations int // --conversations if given, else 0
	seed          int64
	tok           tokenizer.Tokenizer
	corpus        func() (*synth.Corpus, error) // --text-file or the default, built on first use
	maxBytes      int64
	progress      func(done, total int64)
	// used records, by flag name, the value a builder actually used where
	// it differs from the flag's (a --config distribution, a default).
	used map[string]string
}

var (
	syntheticFlags = []string{"conversations", "text-file", "turns", "input-tokens", "output-tokens", "prefix-tokens",
		"common-prefix-tokens", "think-time", "config", "prefix-layout"}
	shareGPTFlags = []string{"input", "conversations", "turns", "input-tokens", "output-tokens", "think-time"}
	agentFlags    = []string{"conversations", "text-file", "rounds", "fan-out", "sub-agents", "sub-agent-context", "tool-result-tokens", "tool-latency",
		"input-tokens", "output-tokens", "system-tokens", "tools", "rate", "burstiness", "token-time"}
	importFlags = []string{"input", "conversations", "text-file", "start", "duration", "speed", "max-input-tokens",
		"limit", "model", "skip-bad", "block-size", "group-window", "prompt-text"}
)

// synthSources are the sources, by name.
var synthSources = []synthSource{
	importer("azure", "Azure LLM inference CSV trace, 2023 or 2024 (--input): real arrivals and lengths", importFlags,
		func(_ *pflag.FlagSet, o synth.ImportOptions) (synth.Source, error) { return synth.NewAzure(o) }),
	importer("bailian", "Qwen-Bailian JSONL trace (--input): real multi-turn conversations and timing", importFlags,
		func(_ *pflag.FlagSet, o synth.ImportOptions) (synth.Source, error) { return synth.NewBailian(o) }),
	importer("burstgpt", "BurstGPT CSV trace (--input): real arrivals, lengths and sessions",
		append(slices.Clone(importFlags), "filter-model", "log-type", "failed"),
		func(f *pflag.FlagSet, o synth.ImportOptions) (synth.Source, error) {
			b := synth.BurstGPTOptions{ImportOptions: o}
			b.FilterModel, _ = f.GetString("filter-model")
			b.LogType, _ = f.GetString("log-type")
			b.Failed, _ = f.GetString("failed")
			return synth.NewBurstGPT(b)
		}),
	{name: "agent", summary: "synthetic agent sessions: rounds of parallel tool calls, sub-agent fan-outs and joins, as dependency graphs (--agent)",
		timed: true, flags: agentFlags, build: buildAgent},
	{name: "otel", summary: "OpenTelemetry GenAI spans (--input FILE|DIR: span-list JSON or OTLP JSON): agent workflows as dependency graphs",
		timed: true, needsInput: true, flags: []string{"input", "conversations", "limit", "model", "max-idle"}, build: buildOTel},
	importer("mooncake", "Mooncake JSONL trace (--input): real arrivals, lengths and hash-prefix reuse", importFlags,
		func(_ *pflag.FlagSet, o synth.ImportOptions) (synth.Source, error) { return synth.NewMooncake(o) }),
	{name: "sharegpt", summary: "ShareGPT JSON or JSONL conversations (--input), with reference answers; --turns/--input-tokens/--output-tokens filter",
		needsInput: true, flags: shareGPTFlags, build: buildShareGPT},
	{name: "vllm-random", summary: "vLLM bench serve's random dataset: single requests of uniform lengths around --random-input-len/--random-output-len",
		flags: []string{"conversations", "text-file", "random-input-len", "random-output-len", "random-range-ratio", "random-prefix-len"},
		build: buildVLLMRandom},
	{name: "vllm-sharegpt", summary: "ShareGPT (--input) sampled as vLLM bench serve does: the first two messages of each record, its validity filter, oversampling",
		needsInput: true, flags: []string{"input", "conversations", "sharegpt-output-len", "no-oversample", "disable-shuffle"},
		build: buildVLLMShareGPT},
	{name: "synthetic", summary: "conversations of corpus text with token-exact lengths drawn from distributions",
		flags: syntheticFlags, build: buildSynthetic},
}

// importer is a production-trace source: timed, from --input, built from
// the shared import flags (importOptions) and its own.
func importer(name, summary string, flags []string, build func(f *pflag.FlagSet, o synth.ImportOptions) (synth.Source, error)) synthSource {
	return synthSource{name: name, summary: summary, timed: true, needsInput: true, flags: flags,
		build: func(f *pflag.FlagSet, in sourceInputs) (synth.Source, error) {
			o, err := importOptions(f, in)
			if err != nil {
				return nil, err
			}
			return build(f, o)
		}}
}

func lookupSource(name string) (synthSource, bool) {
	for _, s := range synthSources {
		if s.name == name {
			return s, true
		}
	}
	return synthSource{}, false
}

func sourceNames() []string {
	var names []string
	for _, s := range synthSources {
		names = append(names, s.name)
	}
	return names
}

func sourceList() string {
	var b strings.Builder
	for _, s := range synthSources {
		fmt.Fprintf(&b, "  %-10s %s\n", s.name, s.summary)
	}
	return b.String()
}

// buildSynthetic reads the synthetic source's flags over an optional vLLM
// config: a flag given explicitly overrides the config.
func buildSynthetic(f *pflag.FlagSet, in sourceInputs) (synth.Source, error) {
	o := synth.SyntheticOptions{Count: synth.DefaultConversations, Seed: in.seed, MaxBytes: in.maxBytes, Progress: in.progress}
	dists := []struct {
		flag string
		unit synth.Unit
		dst  *synth.Dist
	}{
		{"turns", synth.Count, &o.Turns},
		{"input-tokens", synth.Count, &o.InputTokens},
		{"output-tokens", synth.Count, &o.OutputTokens},
		{"prefix-tokens", synth.Count, &o.PrefixTokens},
		{"common-prefix-tokens", synth.Count, &o.CommonPrefixTokens},
		{"think-time", synth.Seconds, &o.ThinkTime},
	}
	var textFiles []string
	o.Layout = synth.LayoutSystem
	if path, _ := f.GetString("config"); path != "" {
		cfg, err := synth.ReadVLLMConfig(path)
		if err != nil {
			return nil, err
		}
		cfg.Apply(&o)
		textFiles = cfg.TextFiles
		o.Layout = synth.LayoutVLLM
	}
	if l, _ := f.GetString("prefix-layout"); f.Changed("prefix-layout") {
		o.Layout = synth.Layout(l)
	}
	in.used["prefix-layout"] = string(o.Layout)
	for _, d := range dists {
		if *d.dst != nil && !f.Changed(d.flag) {
			continue // from --config
		}
		spec, _ := f.GetString(d.flag)
		v, err := synth.ParseDist(spec, d.unit)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", d.flag, err)
		}
		*d.dst = v
	}
	if in.conversations > 0 {
		o.Count = in.conversations
	}
	in.used["conversations"] = strconv.Itoa(o.Count)
	for _, d := range dists {
		in.used[d.flag] = (*d.dst).String()
	}
	var err error
	if len(textFiles) > 0 && !f.Changed("text-file") {
		in.used["text-file"] = strings.Join(textFiles, ",")
		o.Corpus, err = synth.CorpusFromFiles(textFiles, in.tok)
	} else {
		o.Corpus, err = in.corpus()
	}
	if err != nil {
		return nil, err
	}
	return synth.NewSynthetic(o)
}

// buildShareGPT reads --turns, --input-tokens and --output-tokens, when
// given, as filters.
func buildShareGPT(f *pflag.FlagSet, in sourceInputs) (synth.Source, error) {
	o := synth.ShareGPTOptions{Path: in.input, Tokenizer: in.tok, Count: in.conversations, Seed: in.seed,
		MaxBytes: in.maxBytes, Progress: in.progress}
	for _, r := range []struct {
		flag   string
		lo, hi *int
	}{
		{"turns", &o.TurnsMin, &o.TurnsMax},
		{"input-tokens", &o.InputMin, &o.InputMax},
		{"output-tokens", &o.OutputMin, &o.OutputMax},
	} {
		if !f.Changed(r.flag) {
			in.used[r.flag] = "any" // a filter only when given
			continue
		}
		spec, _ := f.GetString(r.flag)
		lo, hi, err := synth.ParseRange(spec)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", r.flag, err)
		}
		*r.lo, *r.hi = lo, hi
	}
	spec, _ := f.GetString("think-time")
	d, err := synth.ParseDist(spec, synth.Seconds)
	if err != nil {
		return nil, fmt.Errorf("--think-time: %w", err)
	}
	o.ThinkTime = d
	in.used["think-time"] = d.String()
	if o.Count == 0 {
		in.used["conversations"] = "all"
	}
	return synth.NewShareGPT(o)
}

// vllmDefaultPrompts is vLLM bench serve's --num-prompts default.
const vllmDefaultPrompts = 1000

func buildVLLMShareGPT(f *pflag.FlagSet, in sourceInputs) (synth.Source, error) {
	o := synth.VLLMShareGPTOptions{Path: in.input, Tokenizer: in.tok, Count: in.conversations, Seed: in.seed,
		MaxBytes: in.maxBytes, Progress: in.progress}
	if o.Count == 0 {
		o.Count = vllmDefaultPrompts
	}
	in.used["conversations"] = strconv.Itoa(o.Count)
	o.OutputLen, _ = f.GetInt("sharegpt-output-len")
	o.NoOversample, _ = f.GetBool("no-oversample")
	o.NoShuffle, _ = f.GetBool("disable-shuffle")
	return synth.NewVLLMShareGPT(o)
}

func buildVLLMRandom(f *pflag.FlagSet, in sourceInputs) (synth.Source, error) {
	o := synth.RandomOptions{Count: in.conversations, Seed: in.seed, MaxBytes: in.maxBytes}
	if o.Count == 0 {
		o.Count = vllmDefaultPrompts
	}
	in.used["conversations"] = strconv.Itoa(o.Count)
	o.InputLen, _ = f.GetInt("random-input-len")
	o.OutputLen, _ = f.GetInt("random-output-len")
	o.RangeRatio, _ = f.GetFloat64("random-range-ratio")
	o.PrefixLen, _ = f.GetInt("random-prefix-len")
	var err error
	if o.Corpus, err = in.corpus(); err != nil {
		return nil, err
	}
	return synth.NewRandom(o)
}

// buildAgent reads the agent source's flags; it schedules its own
// sessions (open-loop arrivals follow the graph), from --rate,
// --burstiness and --token-time.
func buildAgent(f *pflag.FlagSet, in sourceInputs) (synth.Source, error) {
	o := synth.AgentOptions{Count: synth.DefaultConversations, Seed: in.seed, MaxBytes: in.maxBytes}
	if in.conversations > 0 {
		o.Count = in.conversations
	}
	in.used["conversations"] = strconv.Itoa(o.Count)
	for _, d := range []struct {
		flag string
		unit synth.Unit
		dst  *synth.Dist
	}{
		{"rounds", synth.Count, &o.Rounds},
		{"fan-out", synth.Count, &o.Width},
		{"sub-agents", synth.Count, &o.SubAgents},
		{"tool-result-tokens", synth.Count, &o.ResultTokens},
		{"tool-latency", synth.Seconds, &o.ToolLatency},
		{"input-tokens", synth.Count, &o.InputTokens},
		{"output-tokens", synth.Count, &o.OutputTokens},
		{"system-tokens", synth.Count, &o.SystemTokens},
	} {
		spec, _ := f.GetString(d.flag)
		v, err := synth.ParseDist(spec, d.unit)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", d.flag, err)
		}
		*d.dst = v
		in.used[d.flag] = v.String()
	}
	o.Tools, _ = f.GetInt("tools")
	o.SubAgentContext, _ = f.GetString("sub-agent-context")
	o.Schedule.Rate, _ = f.GetFloat64("rate")
	o.Schedule.Burstiness, _ = f.GetFloat64("burstiness")
	o.Schedule.TokenTime, _ = f.GetDuration("token-time")
	var err error
	if o.Corpus, err = in.corpus(); err != nil {
		return nil, err
	}
	return synth.NewAgent(o)
}

// buildOTel reads the OpenTelemetry import's flags.
func buildOTel(f *pflag.FlagSet, in sourceInputs) (synth.Source, error) {
	o := synth.OTelOptions{Path: in.input, Tokenizer: in.tok, MaxBytes: in.maxBytes}
	o.Limit, _ = f.GetInt("limit")
	o.Model, _ = f.GetString("model")
	o.MaxIdle, _ = f.GetDuration("max-idle")
	if o.Limit == 0 {
		o.Limit = in.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	return synth.NewOTel(o)
}

// importOptions reads the flags every production-trace import shares.
func importOptions(f *pflag.FlagSet, in sourceInputs) (synth.ImportOptions, error) {
	o := synth.ImportOptions{Path: in.input, MaxBytes: in.maxBytes}
	o.Start, _ = f.GetDuration("start")
	o.Duration, _ = f.GetDuration("duration")
	o.Speed, _ = f.GetFloat64("speed")
	o.MaxInputTokens, _ = f.GetInt("max-input-tokens")
	o.Limit, _ = f.GetInt("limit")
	o.Model, _ = f.GetString("model")
	o.SkipBad, _ = f.GetBool("skip-bad")
	o.BlockSize, _ = f.GetInt("block-size")
	o.GroupWindow, _ = f.GetDuration("group-window")
	o.PromptText, _ = f.GetBool("prompt-text")
	if o.Limit == 0 {
		o.Limit = in.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	var err error
	o.Corpus, err = in.corpus()
	return o, err
}

// optionFlags names the flag of each options field, for messages.
var optionFlags = map[string]string{
	"SyntheticOptions.Corpus":             "text-file",
	"SyntheticOptions.Count":              "conversations",
	"SyntheticOptions.Turns":              "turns",
	"SyntheticOptions.InputTokens":        "input-tokens",
	"SyntheticOptions.OutputTokens":       "output-tokens",
	"SyntheticOptions.PrefixTokens":       "prefix-tokens",
	"SyntheticOptions.CommonPrefixTokens": "common-prefix-tokens",
	"SyntheticOptions.ThinkTime":          "think-time",
	"SyntheticOptions.Layout":             "prefix-layout",
	"SyntheticOptions.MaxBytes":           "max-trace-size",
	"ShareGPTOptions.Path":                "input",
	"ShareGPTOptions.Tokenizer":           "tokenizer",
	"ShareGPTOptions.Count":               "conversations",
	"ShareGPTOptions.TurnsMin":            "turns",
	"ShareGPTOptions.TurnsMax":            "turns",
	"ShareGPTOptions.InputMin":            "input-tokens",
	"ShareGPTOptions.InputMax":            "input-tokens",
	"ShareGPTOptions.OutputMin":           "output-tokens",
	"ShareGPTOptions.OutputMax":           "output-tokens",
	"ShareGPTOptions.ThinkTime":           "think-time",
	"ShareGPTOptions.MaxBytes":            "max-trace-size",
	"AgentOptions.Corpus":                 "text-file",
	"AgentOptions.Count":                  "conversations",
	"AgentOptions.Rounds":                 "rounds",
	"AgentOptions.Width":                  "fan-out",
	"AgentOptions.SubAgents":              "sub-agents",
	"AgentOptions.SubAgentContext":        "sub-agent-context",
	"AgentOptions.ResultTokens":           "tool-result-tokens",
	"AgentOptions.ToolLatency":            "tool-latency",
	"AgentOptions.InputTokens":            "input-tokens",
	"AgentOptions.OutputTokens":           "output-tokens",
	"AgentOptions.SystemTokens":           "system-tokens",
	"AgentOptions.Tools":                  "tools",
	"AgentOptions.MaxBytes":               "max-trace-size",
	"OTelOptions.Path":                    "input",
	"OTelOptions.Limit":                   "limit",
	"OTelOptions.MaxIdle":                 "max-idle",
	"OTelOptions.MaxBytes":                "max-trace-size",
	"ImportOptions.Path":                  "input",
	"ImportOptions.Start":                 "start",
	"ImportOptions.Duration":              "duration",
	"ImportOptions.Speed":                 "speed",
	"ImportOptions.MaxInputTokens":        "max-input-tokens",
	"ImportOptions.Limit":                 "limit",
	"ImportOptions.BlockSize":             "block-size",
	"ImportOptions.MaxBytes":              "max-trace-size",
	"ImportOptions.GroupWindow":           "group-window",
	"BurstGPTOptions.Failed":              "failed",
	"VLLMShareGPTOptions.Path":            "input",
	"VLLMShareGPTOptions.Count":           "conversations",
	"VLLMShareGPTOptions.OutputLen":       "sharegpt-output-len",
	"RandomOptions.Count":                 "conversations",
	"RandomOptions.InputLen":              "random-input-len",
	"RandomOptions.OutputLen":             "random-output-len",
	"RandomOptions.RangeRatio":            "random-range-ratio",
	"RandomOptions.MaxBytes":              "max-trace-size",
	"VLLMShareGPTOptions.MaxBytes":        "max-trace-size",
	"Schedule.Rate":                       "rate",
	"Schedule.Burstiness":                 "burstiness",
	"Schedule.TokenTime":                  "token-time",
}

// flagError rewrites a library error about an options field into one
// about its flag and the flag's value; other errors come back as they are.
func flagError(f *pflag.FlagSet, err error) error {
	var fe *synth.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	name, ok := optionFlags[fe.Struct+"."+fe.Field]
	if !ok {
		return err
	}
	if errors.Is(fe.Err, synth.ErrTooLarge) {
		return fmt.Errorf("--%s %s: %w (lower --conversations, --turns, --input-tokens, --output-tokens or the prefixes, narrow an import's window, or raise --max-trace-size)",
			name, f.Lookup(name).Value, fe.Err)
	}
	return fmt.Errorf("--%s %s: %w", name, f.Lookup(name).Value, fe.Err)
}

// checkSynthFlags refuses the values a flag's type admits but synth does
// not, where the library would read them as "the default" (0).
func checkSynthFlags(f *pflag.FlagSet) error {
	if n, _ := f.GetInt("conversations"); n < 0 || (n == 0 && f.Changed("conversations")) {
		return fmt.Errorf("--conversations %d: want at least 1 (leave it out for the source's default)", n)
	}
	if v, _ := f.GetFloat64("speed"); f.Changed("speed") && !(v > 0) {
		return fmt.Errorf("--speed %g: want a time compression above 0 (1 = real time, 2 = twice as fast)", v)
	}
	if v, _ := f.GetFloat64("burstiness"); f.Changed("burstiness") && !(v > 0) {
		return fmt.Errorf("--burstiness %g: want a gamma shape above 0 (1 = Poisson)", v)
	}
	return nil
}

// sizeValue is a byte count flag: a plain number of bytes or one with a
// unit, decimal (KB, MB, GB, TB) or binary (KiB, MiB, GiB, TiB).
type sizeValue int64

func newSizeValue(n int64) *sizeValue { v := sizeValue(n); return &v }

func (v *sizeValue) Type() string { return "size" }

func (v *sizeValue) String() string {
	n := int64(*v)
	for _, u := range []struct {
		name string
		b    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.b && n%u.b == 0 {
			return strconv.FormatInt(n/u.b, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (v *sizeValue) Set(s string) error {
	num := strings.TrimSpace(s)
	i := strings.IndexFunc(num, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	unit := ""
	if i >= 0 {
		num, unit = strings.TrimSpace(num[:i]), strings.TrimSpace(num[i:])
	}
	mult, ok := map[string]float64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[strings.ToLower(unit)]
	x, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || x < 0 || x*mult >= math.MaxInt64 {
		return fmt.Errorf("%q is not a size (want bytes, or a number with KB, MB, GB, TB, KiB, MiB, GiB or TiB)", s)
	}
	*v = sizeValue(x * mult)
	return nil
}

func runSynth(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	var vllm *vllmCommand
	if line, _ := f.GetString("from-vllm"); line != "" {
		var err error
		if vllm, err = parseVLLMCommand(line); err != nil {
			return badInput(fmt.Errorf("--from-vllm: %w", err))
		}
		if err := vllm.apply(f); err != nil {
			return badInput(err)
		}
	}
	name, _ := f.GetString("source")
	if agent, _ := f.GetBool("agent"); agent {
		if f.Changed("source") && name != "agent" {
			return badInput(fmt.Errorf("--agent is --source agent, not --source %s: give one of them", name))
		}
		name = "agent"
	}
	src, ok := lookupSource(name)
	if !ok {
		return badInput(fmt.Errorf("--source %q: unknown source (want one of %s)", name, strings.Join(sourceNames(), ", ")))
	}
	tokSpec, _ := f.GetString("tokenizer")
	tok, err := tokenizer.Open(tokSpec)
	if err != nil {
		return badInput(fmt.Errorf("--tokenizer: %w", err))
	}
	seed, _ := f.GetInt64("seed")
	input, _ := f.GetString("input")
	n, _ := f.GetInt("conversations")
	if err := checkSynthFlags(f); err != nil {
		return badInput(err)
	}
	if src.needsInput && input == "" {
		return badInput(fmt.Errorf("--source %s needs --input FILE", name))
	}
	// The schedule is checked before the source is built (which may
	// read a corpus or a large file).
	var sched *synth.Schedule
	if !src.timed {
		rate, _ := f.GetFloat64("rate")
		burst, _ := f.GetFloat64("burstiness")
		tt, _ := f.GetDuration("token-time")
		sched = &synth.Schedule{Rate: rate, Burstiness: burst, TokenTime: tt}
		if err := sched.Validate(); err != nil {
			return badInput(flagError(f, err))
		}
	}
	textFile, _ := f.GetString("text-file")
	progress := newProgress(cmd.ErrOrStderr(), name)
	defer progress.done()

	in := sourceInputs{
		input: input, conversations: n, seed: seed, tok: tok,
		corpus:   sync.OnceValues(func() (*synth.Corpus, error) { return loadCorpus(textFile, tok) }),
		maxBytes: int64(*f.Lookup("max-trace-size").Value.(*sizeValue)),
		progress: progress.report,
		used:     map[string]string{},
	}
	source, err := src.build(f, in)
	if err != nil {
		return badInput(flagError(f, err))
	}
	created, err := synth.CreatedAt()
	if err != nil {
		return badInput(err)
	}
	out, _ := f.GetString("output")
	meta := trace.TraceMeta{
		TracekitVersion: trace.Version,
		Command:         synthCommand(f),
		Seed:            seed,
		Tokenizer:       tok.Name(),
		CreatedAt:       created,
		Options:         flagOptions(f, src, in.used),
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := synth.Generate(ctx, synth.Job{Source: source, Schedule: sched, Meta: meta, Output: out})
	progress.done()
	var outErr *synth.OutputError
	switch {
	case errors.Is(err, context.Canceled):
		return interrupted(fmt.Errorf("interrupted: %s left as it was", out))
	case errors.As(err, &outErr):
		return err
	case err != nil:
		return badInput(flagError(f, err))
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "wrote %s: %d conversations, %d turns, %s, %.2fs (source %s, tokenizer %s, seed %d)\n",
		out, res.Conversations, res.Turns, byteSize(res.Bytes), time.Since(start).Seconds(), name, tok.Name(), seed)
	printOptions(w, res.Report)
	if vllm != nil {
		printVLLMReplay(w, out, vllm)
	}
	return nil
}

// printVLLMReplay prints the replay and analyze commands that send the
// trace as the vllm bench serve command would.
func printVLLMReplay(w io.Writer, path string, c *vllmCommand) {
	replay := append([]string{"tracekit", "replay", path}, c.replay...)
	replay = append(replay, "-o", "recording.parquet")
	fmt.Fprintf(w, "replay with:\n  %s\n", commandLine(replay))
	fmt.Fprintf(w, "analyze with:\n  %s\n", commandLine(append([]string{"tracekit", "analyze", "recording.parquet"}, c.analyze...)))
	if len(c.noted) > 0 {
		fmt.Fprintf(w, "no effect on the workload, not carried over: %s\n", strings.Join(c.noted, " "))
	}
}

func loadCorpus(path string, tok tokenizer.Tokenizer) (*synth.Corpus, error) {
	if path == "" {
		return synth.DefaultCorpus(tok)
	}
	b, err := synth.ReadInput(path)
	if err != nil {
		return nil, fmt.Errorf("--text-file: %w", err)
	}
	c, err := synth.NewCorpus(string(b), tok)
	if err != nil {
		return nil, fmt.Errorf("--text-file %s: %w", path, err)
	}
	return c, nil
}

// commonFlags are read by every source; scheduleFlags by those without
// arrival times of their own.
var (
	commonFlags   = []string{"source", "seed", "tokenizer", "max-trace-size"}
	scheduleFlags = []string{"rate", "burstiness", "token-time"}
)

// flagOptions records in the metadata every option the source read, with
// the value it used (used overrides the flag's value: a distribution from
// --config, a default the source resolved), defaults included, so that a
// trace says how it was made. Flags given that the source does not read
// are listed under "ignored". The output path is not recorded: the same
// seed and inputs give the same file whatever it is called.
func flagOptions(f *pflag.FlagSet, src synthSource, used map[string]string) map[string]string {
	m := map[string]string{}
	reads := slices.Concat(commonFlags, src.flags)
	if !src.timed {
		reads = append(reads, scheduleFlags...)
	}
	for _, name := range reads {
		if v, ok := used[name]; ok {
			m[name] = v
		} else if fl := f.Lookup(name); fl != nil {
			m[name] = fl.Value.String()
		}
	}
	var ignored []string
	f.Visit(func(fl *pflag.Flag) {
		if fl.Name == "from-vllm" {
			m[fl.Name] = fl.Value.String()
		} else if fl.Name != "output" && fl.Name != "agent" && !slices.Contains(reads, fl.Name) {
			ignored = append(ignored, fl.Name)
		}
	})
	if len(ignored) > 0 {
		m["ignored"] = strings.Join(ignored, ",")
	}
	return m
}

// synthCommand is the command line as parsed: "tracekit synth" and every
// flag given, in name order, without -o (the output's name does not change
// the trace). Quoted where a shell would need it.
func synthCommand(f *pflag.FlagSet) string {
	args := []string{"tracekit", "synth"}
	f.Visit(func(fl *pflag.Flag) {
		if fl.Name != "output" {
			args = append(args, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return commandLine(args)
}

func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// progress prints a self-overwriting line on a terminal, at most every
// 200 ms; it prints nothing when stderr is not a TTY.
type progress struct {
	w     io.Writer
	label string
	tty   bool
	mu    sync.Mutex
	last  time.Time
	shown bool
}

func newProgress(w io.Writer, label string) *progress {
	return &progress{w: w, label: label, tty: isTerminal(w)}
}

func (p *progress) report(done, total int64) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond || done == total {
		p.last = now
		pct := 0.0
		if total > 0 {
			pct = 100 * float64(done) / float64(total)
		}
		fmt.Fprintf(p.w, "\r%s: %5.1f%% (%d/%d)   ", p.label, pct, done, total)
		p.shown = true
	}
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
