package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/internal/synth"
	"github.com/tracekit/tracekit/internal/tokenizer"
)

// synthSource is one --source: the flags it reads beyond the common ones
// (recorded in the trace's metadata with the values it used) and how its
// options are made from them.
type synthSource struct {
	name, summary string
	// timed sources set their own arrivals; the others get the --rate
	// schedule.
	timed      bool
	needsInput bool
	flags      []string
	build      func(o *synthOptions, in sourceInputs) (synth.Source, error)
}

// sourceInputs is what every source may take besides the flags.
type sourceInputs struct {
	tok      tokenizer.Tokenizer
	corpus   func() (*synth.Corpus, error) // --text-file or the default, built on first use
	progress func(done, total int64)
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
	{name: "aiperf-dag", summary: "AIPerf dag_jsonl sessions (--input): spawned and forked sub-agents as dependency graphs, started by --rate",
		needsInput: true, flags: []string{"input", "conversations", "limit", "model"}, build: buildAIPerfDAG},
	importer("azure", "Azure LLM inference CSV trace, 2023 or 2024 (--input): real arrivals and lengths", importFlags,
		func(_ *synthOptions, o synth.ImportOptions) (synth.Source, error) { return synth.NewAzure(o) }),
	importer("bailian", "Qwen-Bailian JSONL trace (--input): real multi-turn conversations and timing", importFlags,
		func(_ *synthOptions, o synth.ImportOptions) (synth.Source, error) { return synth.NewBailian(o) }),
	importer("burstgpt", "BurstGPT CSV trace (--input): real arrivals, lengths and sessions",
		append(slices.Clone(importFlags), "filter-model", "log-type", "failed"),
		func(f *synthOptions, o synth.ImportOptions) (synth.Source, error) {
			b := f.burstGPT
			b.ImportOptions = o
			return synth.NewBurstGPT(b)
		}),
	{name: "agent", summary: "synthetic agent sessions: rounds of parallel tool calls, sub-agent fan-outs and joins, as dependency graphs (--agent)",
		timed: true, flags: agentFlags, build: buildAgent},
	{name: "otel", summary: "OpenTelemetry GenAI spans (--input FILE|DIR: span-list JSON or OTLP JSON): agent workflows as dependency graphs",
		timed: true, needsInput: true, flags: []string{"input", "conversations", "limit", "model", "max-idle"}, build: buildOTel},
	{name: "weka", summary: "Weka / kv-cache-tester agentic coding traces (--input FILE|DIR): calls and subagents as dependency graphs, hash-block prefix reuse",
		timed: true, needsInput: true, flags: []string{"input", "conversations", "limit", "model"}, build: buildWeka},
	{name: "dynamo", summary: "NVIDIA Dynamo request traces (--input FILE|DIR of JSONL segments): agent sessions and sub-agents as dependency graphs, hash-block prefix reuse",
		timed: true, needsInput: true, flags: []string{"input", "conversations", "limit", "model"}, build: buildDynamo},
	importer("mooncake", "Mooncake JSONL trace (--input): real arrivals, lengths and hash-prefix reuse", importFlags,
		func(_ *synthOptions, o synth.ImportOptions) (synth.Source, error) { return synth.NewMooncake(o) }),
	{name: "sharegpt", summary: "ShareGPT JSON or JSONL conversations (--input), with reference answers; --turns/--input-tokens/--output-tokens filter",
		needsInput: true, flags: shareGPTFlags, build: buildShareGPT},
	{name: "vllm-random", summary: "vLLM bench serve's random dataset: single requests of uniform lengths around --random-input-len/--random-output-len",
		flags: []string{"conversations", "text-file", "random-input-len", "random-output-len", "random-range-ratio", "random-prefix-len"},
		build: buildVLLMRandom},
	{name: "vllm-sharegpt", summary: "ShareGPT (--input) sampled as vLLM bench serve does: the first two messages of each record, its validity filter, oversampling",
		needsInput: true, flags: []string{"input", "conversations", "sharegpt-output-len", "no-oversample", "disable-shuffle"},
		build: buildVLLMShareGPT},
	{name: "llava", summary: "LLaVA / ShareGPT-4V JSON (--input): ShareGPT conversations with local image files (--image-dir), stored once each in the trace's media file",
		needsInput: true, flags: append(slices.Clone(shareGPTFlags), "image-dir"), build: buildLLaVA},
	{name: "vllm-custom-mm", summary: "vLLM bench serve's custom_mm JSONL (--input): a prompt and its first local image file per request, stored in the trace's media file",
		needsInput: true, flags: []string{"input", "image-dir", "conversations", "custom-output-len", "no-oversample", "disable-shuffle"},
		build: buildVLLMCustomMM},
	{name: "swe-agent", summary: "SWE-agent trajectories (--input FILE.traj|DIR): each model call of the history with its answer and tool latency, started by --rate",
		needsInput: true, flags: []string{"input", "conversations", "limit", "model"}, build: buildSWEAgent},
	{name: "synthetic", summary: "conversations of corpus text with token-exact lengths drawn from distributions",
		flags: syntheticFlags, build: buildSynthetic},
}

// importer is a production-trace source: timed, from --input, built from
// the shared import flags (importOptions) and its own.
func importer(name, summary string, flags []string, build func(f *synthOptions, o synth.ImportOptions) (synth.Source, error)) synthSource {
	return synthSource{name: name, summary: summary, timed: true, needsInput: true, flags: flags,
		build: func(f *synthOptions, in sourceInputs) (synth.Source, error) {
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

// distFlag is a distribution flag: its name, its value and the unit of
// its numbers.
type distFlag struct {
	name string
	spec *string
	unit synth.Unit
}

// parse reads the flag's distribution.
func (d distFlag) parse() (synth.Dist, error) {
	v, err := synth.ParseDist(*d.spec, d.unit)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", d.name, err)
	}
	return v, nil
}

// buildSynthetic reads the synthetic source's flags over an optional vLLM
// config: a flag given explicitly overrides the config.
func buildSynthetic(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.SyntheticOptions{Count: synth.DefaultConversations, Seed: f.seed, MaxBytes: int64(f.maxBytes), Progress: in.progress}
	dists := []struct {
		flag distFlag
		dst  *synth.Dist
	}{
		{distFlag{"turns", &f.turns, synth.Count}, &o.Turns},
		{distFlag{"input-tokens", &f.inputTokens, synth.Count}, &o.InputTokens},
		{distFlag{"output-tokens", &f.outputTokens, synth.Count}, &o.OutputTokens},
		{distFlag{"prefix-tokens", &f.prefixTokens, synth.Count}, &o.PrefixTokens},
		{distFlag{"common-prefix-tokens", &f.commonPrefixTokens, synth.Count}, &o.CommonPrefixTokens},
		{distFlag{"think-time", &f.thinkTime, synth.Seconds}, &o.ThinkTime},
	}
	var textFiles []string
	o.Layout = synth.LayoutSystem
	if f.config != "" {
		cfg, err := synth.ReadVLLMConfig(f.config)
		if err != nil {
			return nil, err
		}
		cfg.Apply(&o)
		textFiles = cfg.TextFiles
		o.Layout = synth.LayoutVLLM
	}
	if f.flags.Changed("prefix-layout") {
		o.Layout = synth.Layout(f.prefixLayout)
	}
	in.used["prefix-layout"] = string(o.Layout)
	for _, d := range dists {
		if *d.dst != nil && !f.flags.Changed(d.flag.name) {
			continue // from --config
		}
		v, err := d.flag.parse()
		if err != nil {
			return nil, err
		}
		*d.dst = v
	}
	if f.conversations > 0 {
		o.Count = f.conversations
	}
	in.used["conversations"] = strconv.Itoa(o.Count)
	for _, d := range dists {
		in.used[d.flag.name] = (*d.dst).String()
	}
	var err error
	if len(textFiles) > 0 && !f.flags.Changed("text-file") {
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
func buildShareGPT(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.ShareGPTOptions{Path: f.input, Tokenizer: in.tok, Count: f.conversations, Seed: f.seed,
		MaxBytes: int64(f.maxBytes), Progress: in.progress}
	for _, r := range []struct {
		flag   string
		spec   string
		lo, hi *int
	}{
		{"turns", f.turns, &o.TurnsMin, &o.TurnsMax},
		{"input-tokens", f.inputTokens, &o.InputMin, &o.InputMax},
		{"output-tokens", f.outputTokens, &o.OutputMin, &o.OutputMax},
	} {
		if !f.flags.Changed(r.flag) {
			in.used[r.flag] = "any" // a filter only when given
			continue
		}
		lo, hi, err := synth.ParseRange(r.spec)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", r.flag, err)
		}
		*r.lo, *r.hi = lo, hi
	}
	d, err := distFlag{"think-time", &f.thinkTime, synth.Seconds}.parse()
	if err != nil {
		return nil, err
	}
	o.ThinkTime = d
	in.used["think-time"] = d.String()
	if o.Count == 0 {
		in.used["conversations"] = "all"
	}
	return synth.NewShareGPT(o)
}

// buildLLaVA is buildShareGPT's source with its images read.
func buildLLaVA(f *synthOptions, in sourceInputs) (synth.Source, error) {
	sg, err := buildShareGPT(f, in)
	if err != nil {
		return nil, err
	}
	return synth.NewLLaVA(synth.LLaVAOptions{ShareGPTOptions: sg.(*synth.ShareGPT).Opts, ImageDir: f.imageDir})
}

func buildVLLMCustomMM(f *synthOptions, in sourceInputs) (synth.Source, error) {
	if f.customOutputLen < 1 {
		return nil, fmt.Errorf("--custom-output-len %d: want max_tokens of 1 or more", f.customOutputLen)
	}
	return synth.NewVLLMCustomMM(synth.VLLMCustomMMOptions{Path: f.input, ImageDir: f.imageDir, Tokenizer: in.tok,
		Count: vllmCount(f, in), Seed: f.seed, OutputLen: f.customOutputLen, NoShuffle: f.vllmShareGPT.NoShuffle,
		NoOversample: f.vllmShareGPT.NoOversample, MaxBytes: int64(f.maxBytes), Progress: in.progress})
}

// vllmCount is --conversations, or vLLM bench serve's --num-prompts
// default.
func vllmCount(f *synthOptions, in sourceInputs) int {
	n := f.conversations
	if n == 0 {
		n = synth.VLLMDefaultPrompts
	}
	in.used["conversations"] = strconv.Itoa(n)
	return n
}

func buildVLLMShareGPT(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := f.vllmShareGPT
	o.Path, o.Tokenizer, o.Seed, o.MaxBytes, o.Progress = f.input, in.tok, f.seed, int64(f.maxBytes), in.progress
	o.Count = vllmCount(f, in)
	return synth.NewVLLMShareGPT(o)
}

func buildVLLMRandom(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := f.vllmRandom
	o.Seed, o.MaxBytes = f.seed, int64(f.maxBytes)
	o.Count = vllmCount(f, in)
	var err error
	if o.Corpus, err = in.corpus(); err != nil {
		return nil, err
	}
	return synth.NewRandom(o)
}

// buildAgent reads the agent source's flags; it schedules its own
// sessions (open-loop arrivals follow the graph), from --rate,
// --burstiness and --token-time.
func buildAgent(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := f.agentOpts
	o.Count, o.Seed, o.MaxBytes, o.Schedule = synth.DefaultConversations, f.seed, int64(f.maxBytes), f.schedule
	if f.conversations > 0 {
		o.Count = f.conversations
	}
	in.used["conversations"] = strconv.Itoa(o.Count)
	for _, d := range []struct {
		flag distFlag
		dst  *synth.Dist
	}{
		{distFlag{"rounds", &f.rounds, synth.Count}, &o.Rounds},
		{distFlag{"fan-out", &f.fanOut, synth.Count}, &o.Width},
		{distFlag{"sub-agents", &f.subAgents, synth.Count}, &o.SubAgents},
		{distFlag{"tool-result-tokens", &f.toolResultTokens, synth.Count}, &o.ResultTokens},
		{distFlag{"tool-latency", &f.toolLatency, synth.Seconds}, &o.ToolLatency},
		{distFlag{"input-tokens", &f.inputTokens, synth.Count}, &o.InputTokens},
		{distFlag{"output-tokens", &f.outputTokens, synth.Count}, &o.OutputTokens},
		{distFlag{"system-tokens", &f.systemTokens, synth.Count}, &o.SystemTokens},
	} {
		v, err := d.flag.parse()
		if err != nil {
			return nil, err
		}
		*d.dst = v
		in.used[d.flag.name] = v.String()
	}
	var err error
	if o.Corpus, err = in.corpus(); err != nil {
		return nil, err
	}
	return synth.NewAgent(o)
}

// buildOTel reads the OpenTelemetry import's flags.
func buildOTel(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.OTelOptions{Path: f.input, Tokenizer: in.tok, MaxBytes: int64(f.maxBytes),
		Limit: f.imports.Limit, Model: f.imports.Model, MaxIdle: f.maxIdle}
	if o.Limit == 0 {
		o.Limit = f.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	return synth.NewOTel(o)
}

// buildAIPerfDAG reads the AIPerf dag_jsonl import's flags.
func buildAIPerfDAG(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.AIPerfDAGOptions{Path: f.input, Tokenizer: in.tok, MaxBytes: int64(f.maxBytes),
		Limit: f.imports.Limit, Model: f.imports.Model}
	if o.Limit == 0 {
		o.Limit = f.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	return synth.NewAIPerfDAG(o)
}

// buildWeka reads the Weka import's flags.
func buildWeka(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.WekaOptions{Path: f.input, MaxBytes: int64(f.maxBytes), Limit: f.imports.Limit, Model: f.imports.Model}
	if o.Limit == 0 {
		o.Limit = f.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	return synth.NewWeka(o)
}

// buildSWEAgent reads the SWE-agent import's flags.
func buildSWEAgent(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.SWEAgentOptions{Path: f.input, Tokenizer: in.tok, MaxBytes: int64(f.maxBytes), Limit: f.imports.Limit, Model: f.imports.Model}
	if o.Limit == 0 {
		o.Limit = f.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	return synth.NewSWEAgent(o)
}

// buildDynamo reads the Dynamo import's flags.
func buildDynamo(f *synthOptions, in sourceInputs) (synth.Source, error) {
	o := synth.DynamoOptions{Path: f.input, MaxBytes: int64(f.maxBytes), Limit: f.imports.Limit, Model: f.imports.Model}
	if o.Limit == 0 {
		o.Limit = f.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	return synth.NewDynamo(o)
}

// importOptions are the options every production-trace import shares:
// --limit defaults to --conversations.
func importOptions(f *synthOptions, in sourceInputs) (synth.ImportOptions, error) {
	o := f.imports
	o.Path, o.MaxBytes = f.input, int64(f.maxBytes)
	if o.Limit == 0 {
		o.Limit = f.conversations
	}
	in.used["limit"] = strconv.Itoa(o.Limit)
	var err error
	o.Corpus, err = in.corpus()
	return o, err
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

// synthInputErr marks err, about an options field or the input, as bad
// input (exit.go names the field's flag); a trace too large for
// --max-trace-size also says how to make it smaller.
func synthInputErr(err error) error {
	if errors.Is(err, synth.ErrTooLarge) {
		err = fmt.Errorf("%w (lower --conversations, --turns, --input-tokens, --output-tokens or the prefixes, narrow an import's window, or raise --max-trace-size)", err)
	}
	return badInput(err)
}

// sizeValue is a byte count flag: a plain number of bytes or one with a
// unit, decimal (KB, MB, GB, TB) or binary (KiB, MiB, GiB, TiB).
type sizeValue int64

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

// commonFlags are read by every source; scheduleFlags by those without
// arrival times of their own.
var (
	commonFlags   = []string{"source", "seed", "tokenizer", "max-trace-size"}
	scheduleFlags = []string{"rate", "burstiness", "token-time"}
	// rampFlags are read with the schedule when --rate-ramp is given.
	rampFlags = []string{"rate-ramp", "rate-ramp-start", "rate-ramp-duration", "rate-ramp-steps"}
)

// flagOptions records in the metadata every option the source read, with
// the value it used (used overrides the flag's value: a distribution from
// --config, a default the source resolved), defaults included, so that a
// trace says how it was made. Flags given that the source does not read
// are listed under "ignored". The output path and --force are not
// recorded: the same seed and inputs give the same file whatever it is
// called and whether it replaced another.
func flagOptions(f *pflag.FlagSet, src synthSource, used map[string]string) map[string]string {
	m := map[string]string{}
	reads := slices.Concat(commonFlags, src.flags)
	if !src.timed {
		reads = append(reads, scheduleFlags...)
		if f.Changed("rate-ramp") {
			reads = append(reads, rampFlags...)
		}
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
		} else if !outputFlags[fl.Name] && fl.Name != "agent" && !slices.Contains(reads, fl.Name) {
			ignored = append(ignored, fl.Name)
		}
	})
	if len(ignored) > 0 {
		m["ignored"] = strings.Join(ignored, ",")
	}
	return m
}

// outputFlags say where the trace goes, not what it holds: neither the
// metadata's options nor its command line record them.
var outputFlags = map[string]bool{"output": true, "force": true}

// synthCommand is the command line as parsed: "tracekit synth" and every
// flag given, in name order, without -o and --force (where the trace goes
// does not change it). Quoted where a shell would need it.
func synthCommand(f *pflag.FlagSet) string {
	args := []string{"tracekit", "synth"}
	f.Visit(func(fl *pflag.Flag) {
		if !outputFlags[fl.Name] {
			args = append(args, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return commandLine(args)
}
