package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	var o synthOptions
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

--endpoint names the API every request is sent on (default: replay's
--endpoint). embeddings, rerank and score make single requests of corpus
text: --batch-size inputs of --input-tokens tokens, or one query of
--query-tokens and --documents documents of --document-tokens.
--reasoning-tokens gives each generated answer a reasoning phase of that
many tokens on top of its output tokens (not on completions).

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
  tracekit synth --endpoint embeddings --batch-size 1-32 --input-tokens 64-512 --rate 50 -o emb.parquet
  tracekit synth --endpoint rerank --documents 20 --query-tokens 32 --document-tokens 200-400 -o rerank.parquet
  tracekit synth --tokenizer ./Llama-3.1-8B/tokenizer.json --seed 7
  tracekit synth --from-vllm 'vllm bench serve --dataset-name sharegpt --dataset-path sg.json --num-prompts 500 --request-rate 10'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSynth(cmd, &o) },
	}
	declareSynthFlags(cmd.Flags(), &o)
	return cmd
}

// synthOptions holds synth's flags, each bound to a field (the shared
// and per-source ones). flags answers what binding cannot: which flags
// were given (one given overrides a --config value, a ShareGPT range
// filters only when given) and their names and values, for messages and
// the trace's metadata.
type synthOptions struct {
	flags *pflag.FlagSet

	source, input, tokenizer, textFile, output string
	agent, force                               bool
	conversations                              int
	seed                                       int64
	maxBytes                                   sizeValue
	schedule                                   synth.Schedule // --rate, --burstiness, --token-time

	// synthetic; sharegpt reads turns, inputTokens and outputTokens as
	// MIN-MAX filters, and thinkTime. Distributions are parsed by the
	// source that reads them.
	turns, inputTokens, outputTokens, prefixTokens, commonPrefixTokens, thinkTime string
	config, prefixLayout                                                          string

	// the API every request is sent on ("" = replay's --endpoint), and
	// the shapes of the non-generating APIs' requests (distributions)
	endpoint, batchSize, documents, queryTokens, documentTokens string
	// reasoning tokens each generated answer starts with ("" = none), and
	// the model mix ("" = none)
	reasoningTokens, modelMix string
	// media on each turn's user message: distributions and shapes
	images, imageSize, imageFormat, audioSeconds, videos, videoSize string
	videoFrames                                                     int32
	// vLLM random-mm's item sampling
	mmBase            int
	mmRatio           float64
	mmLimit, mmBucket string

	// agent sessions: distributions, and the options taken as they are
	// (Tools, SubAgentContext).
	rounds, fanOut, subAgents, toolResultTokens, toolLatency, systemTokens string
	agentOpts                                                              synth.AgentOptions

	// the production-trace imports (ImportOptions' own fields), otel's
	// --max-idle, burstgpt's filters, vLLM bench serve's datasets
	imports      synth.ImportOptions
	maxIdle      time.Duration
	burstGPT     synth.BurstGPTOptions
	vllmShareGPT synth.VLLMShareGPTOptions
	vllmRandom   synth.RandomOptions
	fromVLLM     string
	// the multimodal datasets (llava, vllm-custom-mm): where their
	// relative image paths are read from, and custom_mm's max_tokens
	imageDir        string
	customOutputLen int
}

// declareSynthFlags binds every synth flag to a field of o: the common
// ones, then each source's (a flag several sources read is declared once).
func declareSynthFlags(f *pflag.FlagSet, o *synthOptions) {
	o.flags = f
	f.StringVar(&o.source, "source", "synthetic", "where conversations come from: "+strings.Join(sourceNames(), ", "))
	f.StringVar(&o.input, "input", "", "input file of the source (sharegpt JSON/JSONL, a production trace)")
	f.IntVar(&o.conversations, "conversations", 0, "conversations to write, at least 1 (default: 100 synthetic, all of a file)")
	f.Int64Var(&o.seed, "seed", 0, "random seed; the same seed and inputs give the same trace")
	f.StringVar(&o.tokenizer, "tokenizer", tokenizer.DefaultName, "token counting: o200k_base, cl100k_base, or a Hugging Face tokenizer.json path")
	f.StringVar(&o.textFile, "text-file", "", "plain-text corpus for synthetic text (default: embedded generated prose)")
	f.StringVarP(&o.output, "output", "o", "trace.parquet", "trace file to write (never replaced unless --force)")
	f.BoolVar(&o.force, "force", false, "replace an existing trace (once the new one is complete)")
	f.Float64Var(&o.schedule.Rate, "rate", 0, "conversation starts per second; 0 or inf starts all at once")
	f.Float64Var(&o.schedule.Burstiness, "burstiness", 1.0, "gamma shape of start gaps: 1 Poisson, <1 burstier, >1 more regular")
	f.StringVar((*string)(&o.schedule.Ramp), "rate-ramp", "", "ramp the start rate from --rate-ramp-start to --rate: linear, exponential or steps (default: a constant --rate)")
	f.Float64Var(&o.schedule.RampStart, "rate-ramp-start", 0, "the ramp's first rate, conversation starts per second")
	f.DurationVar(&o.schedule.RampDuration, "rate-ramp-duration", 0, "the ramp's length in time, then --rate (0: over the conversations, as vLLM's --ramp-up-strategy ramps over the requests)")
	f.IntVar(&o.schedule.RampSteps, "rate-ramp-steps", 0, "--rate-ramp steps: how many equal plateaus")
	f.DurationVar(&o.schedule.TokenTime, "token-time", synth.DefaultTokenTime, "estimated time per output token for open-loop arrivals of later turns")
	o.maxBytes = sizeValue(synth.DefaultMaxBytes)
	f.Var(&o.maxBytes, "max-trace-size", "refuse to make a trace whose text is estimated above this size (e.g. 512MiB, 16GiB; 0 = no limit)")

	// synthetic; sharegpt reads --turns, --input-tokens and --output-tokens
	// as MIN-MAX filters, and --think-time.
	f.StringVar(&o.turns, "turns", synth.DefaultTurns, "user turns (requests) per conversation: a distribution; for sharegpt a MIN-MAX filter")
	f.StringVar(&o.inputTokens, "input-tokens", synth.DefaultInputTokens, "tokens per user message: a distribution; for sharegpt a MIN-MAX filter")
	f.StringVar(&o.outputTokens, "output-tokens", synth.DefaultOutputTokens, "max_tokens per turn (reference answer length): a distribution; for sharegpt a MIN-MAX filter")
	f.StringVar(&o.prefixTokens, "prefix-tokens", "0", "per-conversation prefix tokens (system message of turn 0): a distribution")
	f.StringVar(&o.commonPrefixTokens, "common-prefix-tokens", "0", "prefix tokens shared by all conversations: a distribution drawn once")
	f.StringVar(&o.thinkTime, "think-time", "0s", "user think time before turns 2..n: a distribution of durations, e.g. lognormal:average=5s")
	f.StringVar(&o.config, "config", "", "vLLM multi-turn generation config JSON (generate_multi_turn.json); flags given explicitly override it")
	f.StringVar(&o.prefixLayout, "prefix-layout", "", "turn 0's prefixes: vllm (in the user message, the common prefix inside --input-tokens) or system (a system message on top of a full user message); default vllm with --config, else system")

	// the API
	f.StringVar(&o.endpoint, "endpoint", "", "API every request is sent on: "+strings.Join(trace.Endpoints, ", ")+" (default: replay's --endpoint); embeddings, rerank and score make single requests of corpus text; transcriptions and translations need --audio-seconds")
	f.StringVar(&o.reasoningTokens, "reasoning-tokens", "", "reasoning tokens each answer starts with, added to its output tokens: a distribution (default none; replay --mock-hints asks tracekit mock for them)")
	f.StringVar(&o.modelMix, "model-mix", "", "split the conversations over models or LoRA adapters: 'base=0.5,lora-a=0.3,lora-b=0.2' (seeded, per conversation; the trace's model column)")
	f.StringVar(&o.images, "images", "", "images on each request's user message: a distribution (default none); replay sends them after the text")
	f.StringVar(&o.imageSize, "image-size", "512x512", "images: WxH, or a comma-separated list drawn from uniformly, e.g. 1024x1024,1280x720")
	f.StringVar(&o.imageFormat, "image-format", "jpeg", "images: png or jpeg (random pixels; jpeg at quality 75, as vLLM's random-mm)")
	f.StringVar(&o.audioSeconds, "audio-seconds", "", "an audio clip (WAV, 16 kHz mono) on each request's user message, its length a distribution of durations (default none)")
	f.StringVar(&o.videos, "videos", "", "videos (mp4) on each request's user message: a distribution (default none)")
	f.StringVar(&o.videoSize, "video-size", "512x512", "videos: WxH of each frame")
	f.Int32Var(&o.videoFrames, "video-frames", 16, "videos: frames of each video")
	f.IntVar(&o.mmBase, "random-mm-base-items-per-request", 1, "images and videos per request as vLLM's random-mm draws them: the base count (any --random-mm-* flag turns this sampling on)")
	f.Float64Var(&o.mmRatio, "random-mm-num-mm-items-range-ratio", 0, "random-mm: counts uniform in [floor(base*(1-r)), ceil(base*(1+r))], 0 <= r <= 1, capped by the limits")
	f.StringVar(&o.mmLimit, "random-mm-limit-mm-per-prompt", synth.DefaultRandomMMLimit, "random-mm: the most items of each modality per request, a dict")
	f.StringVar(&o.mmBucket, "random-mm-bucket-config", synth.DefaultRandomMMBuckets, "random-mm: a Python dict of (height, width, frames) to probability; 1 frame is an image, more a video")
	f.StringVar(&o.batchSize, "batch-size", synth.DefaultBatchSize, "embeddings: inputs per request: a distribution (each input has --input-tokens tokens)")
	f.StringVar(&o.documents, "documents", synth.DefaultDocuments, "rerank, score: documents per query: a distribution")
	f.StringVar(&o.queryTokens, "query-tokens", synth.DefaultQueryTokens, "rerank, score: tokens of the query: a distribution")
	f.StringVar(&o.documentTokens, "document-tokens", synth.DefaultDocumentTokens, "rerank, score: tokens of each document: a distribution")

	// agent sessions (--agent)
	f.BoolVar(&o.agent, "agent", false, "synthetic agent sessions (same as --source agent): tool-calling rounds, parallel tool calls and sub-agent fan-outs as dependency graphs")
	f.StringVar(&o.rounds, "rounds", synth.DefaultAgentRounds, "agent: tool-calling rounds per session (then one text answer): a distribution")
	f.StringVar(&o.fanOut, "fan-out", synth.DefaultAgentWidth, "agent: parallel tool calls per round: a distribution")
	f.StringVar(&o.subAgents, "sub-agents", "0", "agent: parallel LLM branches a round fans out to, joined by one request (0 or 1 = none): a distribution")
	f.StringVar(&o.agentOpts.SubAgentContext, "sub-agent-context", synth.SubAgentsShared, "agent: shared (a branch continues the round's history and the join merges the branches') or own (a branch starts a fresh context, as an agent run as a tool; the join continues the round with the tool results and waits for the branches without taking their answers: wait-only edges)")
	f.StringVar(&o.toolResultTokens, "tool-result-tokens", synth.DefaultAgentResultTokens, "agent: tokens per tool result: a distribution")
	f.StringVar(&o.toolLatency, "tool-latency", synth.DefaultAgentToolLatency, "agent: time each tool call runs (a round waits for its slowest): a distribution of durations")
	f.StringVar(&o.systemTokens, "system-tokens", synth.DefaultAgentSystemTokens, "agent: tokens of each session's system prompt: a distribution")
	f.IntVar(&o.agentOpts.Tools, "tools", 8, "agent: function definitions in every request's tools array")

	// the production-trace imports
	f.DurationVar(&o.imports.Start, "start", 0, "imported traces: start of the window on the trace's timeline")
	f.DurationVar(&o.imports.Duration, "duration", 0, "imported traces: window length (0 = to the end)")
	f.Float64Var(&o.imports.Speed, "speed", 1, "imported traces: time compression (2 = twice as fast)")
	f.IntVar(&o.imports.MaxInputTokens, "max-input-tokens", 0, "imported traces: clamp each prompt to this many tokens (0 = none)")
	f.DurationVar(&o.maxIdle, "max-idle", 0, "otel: shorten every stretch with no span open that is longer than this to this (exports collected days apart); 0 keeps the recorded times")
	f.IntVar(&o.imports.Limit, "limit", 0, "imported traces: keep the first N conversations of the window (0 = all; default --conversations)")
	f.StringVar(&o.imports.Model, "model", "", "imported traces: model name stamped on every request (default: replay's --model)")
	f.BoolVar(&o.imports.SkipBad, "skip-bad", false, "imported traces: count and skip malformed rows instead of failing")
	f.IntVar(&o.imports.BlockSize, "block-size", 0, "imported traces: tokens per hash_ids block (0 = the format's: mooncake 512, bailian 16)")
	f.BoolVar(&o.imports.PromptText, "prompt-text", false, "imported traces: store every prompt's text in the trace instead of virtual prompts (lengths, block hashes, a seed) that replay makes into the same text")
	f.DurationVar(&o.imports.GroupWindow, "group-window", synth.DefaultGroupWindow, "imported traces: rows may be out of time order by this much, and a session or chain idle this long is complete; memory holds this much of the file (widen it when synth says so)")

	// vLLM bench serve's datasets
	f.IntVar(&o.vllmShareGPT.OutputLen, "sharegpt-output-len", 0, "vllm-sharegpt: max_tokens of every request (0 = the answer's length)")
	f.BoolVar(&o.vllmShareGPT.NoOversample, "no-oversample", false, "vllm-sharegpt: keep fewer requests than --conversations when the file has fewer valid ones")
	f.BoolVar(&o.vllmShareGPT.NoShuffle, "disable-shuffle", false, "vllm-sharegpt: take records in file order")
	f.IntVar(&o.vllmRandom.InputLen, "random-input-len", 1024, "vllm-random: input tokens per request (around it with --random-range-ratio)")
	f.IntVar(&o.vllmRandom.OutputLen, "random-output-len", 128, "vllm-random: output tokens per request")
	f.Float64Var(&o.vllmRandom.RangeRatio, "random-range-ratio", 0, "vllm-random: lengths uniform in [len*(1-r), len*(1+r)], 0 <= r < 1")
	f.IntVar(&o.vllmRandom.PrefixLen, "random-prefix-len", 0, "vllm-random: tokens of a prefix shared by every prompt, on top of the input length")
	f.IntVar(&o.customOutputLen, "custom-output-len", synth.VLLMDefaultCustomOutputLen, "vllm-custom-mm: max_tokens of every request")
	f.StringVar(&o.imageDir, "image-dir", "", "llava, vllm-custom-mm: directory relative image paths are read from (default: the --input file's directory)")
	f.StringVar(&o.fromVLLM, "from-vllm", "", "a vllm bench serve command line: write the equivalent trace and print the matching replay command")

	// burstgpt
	f.StringVar(&o.burstGPT.FilterModel, "filter-model", "", "burstgpt: keep only rows of this Model (ChatGPT, GPT-4)")
	f.StringVar(&o.burstGPT.LogType, "log-type", "", "burstgpt: keep only rows of this Log Type (conversation, api)")
	f.StringVar(&o.burstGPT.Failed, "failed", synth.FailedDrop, "burstgpt: failed requests (0 response tokens): drop, keep or flag")
}

// check refuses the values a flag's type admits but synth does not,
// where the library would read them as "the default" (0).
func (o *synthOptions) check() error {
	f := o.flags
	if n := o.conversations; n < 0 || (n == 0 && f.Changed("conversations")) {
		return fmt.Errorf("--conversations %d: want at least 1 (leave it out for the source's default)", n)
	}
	if v := o.imports.Speed; f.Changed("speed") && !(v > 0) {
		return fmt.Errorf("--speed %g: want a time compression above 0 (1 = real time, 2 = twice as fast)", v)
	}
	if v := o.schedule.Burstiness; f.Changed("burstiness") && !(v > 0) {
		return fmt.Errorf("--burstiness %g: want a gamma shape above 0 (1 = Poisson)", v)
	}
	return nil
}

// sourceName is the source asked for: --source, or agent with --agent.
func (o *synthOptions) sourceName() (string, error) {
	if !o.agent {
		return o.source, nil
	}
	if o.flags.Changed("source") && o.source != "agent" {
		return "", fmt.Errorf("--agent is --source agent, not --source %s: give one of them", o.source)
	}
	return "agent", nil
}

// runSynth checks the flags, builds the source they name, writes the
// trace and reports it. Exit codes: 2 for bad flags or input, or an
// existing output without --force; 1 when the output cannot be written;
// 130 when a signal stopped it (the output is left as it was).
func runSynth(cmd *cobra.Command, o *synthOptions) error {
	var vllm *vllmCommand
	if o.fromVLLM != "" {
		var err error
		if vllm, err = parseVLLMCommand(o.fromVLLM); err != nil {
			return badInput(fmt.Errorf("--from-vllm: %w", err))
		}
		if err := vllm.apply(o.flags); err != nil {
			return badInput(err)
		}
	}
	name, err := o.sourceName()
	if err != nil {
		return badInput(err)
	}
	src, ok := lookupSource(name)
	if !ok {
		return badInput(fmt.Errorf("--source %q: unknown source (want one of %s)", name, strings.Join(sourceNames(), ", ")))
	}
	tok, err := tokenizer.Open(o.tokenizer)
	if err != nil {
		return badInput(fmt.Errorf("--tokenizer: %w", err))
	}
	if err := o.check(); err != nil {
		return badInput(err)
	}
	if err := o.checkEndpoint(name); err != nil {
		return badInput(err)
	}
	if o.pooling() {
		src = poolingSource(src, o.endpoint)
	} else if o.flags.Changed("endpoint") {
		src.flags = append(slices.Clone(src.flags), "endpoint")
	}
	var reasoning synth.Dist
	if o.flags.Changed("reasoning-tokens") {
		if reasoning, err = (distFlag{"reasoning-tokens", &o.reasoningTokens, synth.Count}).parse(); err != nil {
			return badInput(err)
		}
		src.flags = append(slices.Clone(src.flags), "reasoning-tokens")
	}
	var models []synth.WeightedModel
	if o.flags.Changed("model-mix") {
		if models, err = synth.ParseModelMix(o.modelMix); err != nil {
			return badInput(fmt.Errorf("--model-mix: %w", err))
		}
		src.flags = append(slices.Clone(src.flags), "model-mix")
	}
	mediaOpts, err := o.mediaOptions()
	if err != nil {
		return badInput(err)
	}
	if mediaOpts != nil {
		src.flags = append(slices.Clone(src.flags), mediaFlags...)
	}
	if src.needsInput && o.input == "" {
		return badInput(fmt.Errorf("--source %s needs --input FILE", name))
	}
	// The schedule is checked before the source is built (which may
	// read a corpus or a large file).
	var sched *synth.Schedule
	if !src.timed {
		s := o.schedule
		s.VLLMSpan = vllm != nil
		if err := s.Validate(); err != nil {
			return synthInputErr(err)
		}
		sched = &s
	}
	progress := newProgress(cmd.ErrOrStderr(), name)
	defer progress.done()

	in := sourceInputs{
		tok:      tok,
		corpus:   sync.OnceValues(func() (*synth.Corpus, error) { return loadCorpus(o.textFile, tok) }),
		progress: progress.report,
		used:     map[string]string{},
	}
	source, err := src.build(o, in)
	if err != nil {
		return synthInputErr(err)
	}
	created, err := synth.CreatedAt()
	if err != nil {
		return badInput(err)
	}
	meta := trace.TraceMeta{
		TracekitVersion: trace.Version,
		Command:         synthCommand(o.flags),
		Seed:            o.seed,
		Tokenizer:       tok.Name(),
		CreatedAt:       created,
		Options:         flagOptions(o.flags, src, in.used),
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := synth.Generate(ctx, synth.Job{Source: source, Schedule: sched, Meta: meta, Output: o.output, Replace: o.force, Endpoint: o.endpoint, Reasoning: reasoning, Models: models, Media: mediaOpts})
	progress.done()
	var outErr *synth.OutputError
	switch {
	case errors.Is(err, context.Canceled):
		return interrupted(fmt.Errorf("interrupted: %s left as it was", o.output))
	case errors.As(err, &outErr) && errors.Is(err, fs.ErrExist):
		if _, serr := os.Lstat(o.output); serr != nil { // the trace's media file is in the way
			return badInput(fmt.Errorf("%s exists: pass --force to replace it with the new trace's media (%s)", trace.MediaPath(o.output), err))
		}
		return badInput(fmt.Errorf("%s exists: pass --force to replace it (the new trace replaces it only once complete)", o.output))
	case errors.As(err, &outErr):
		return err
	case err != nil:
		return synthInputErr(err)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "wrote %s: %d conversations, %d turns, %s, %.2fs (source %s, tokenizer %s, seed %d)\n",
		o.output, res.Conversations, res.Turns, byteSize(res.Bytes), time.Since(start).Seconds(), name, tok.Name(), o.seed)
	if res.MediaItems > 0 {
		fmt.Fprintf(w, "wrote %s: %d media items, %s (each distinct image once)\n", trace.MediaPath(o.output), res.MediaItems, byteSize(res.MediaBytes))
	}
	printOptions(w, res.Report)
	if vllm != nil {
		printVLLMReplay(w, o.output, vllm)
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
	for _, d := range c.dropped {
		fmt.Fprintf(w, "left out: %s\n", d)
	}
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
