package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/synth"
	"github.com/tracekit/tracekit/tokenizer"
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
  tracekit synth --tokenizer ./Llama-3.1-8B/tokenizer.json --seed 7`,
		Args: cobra.NoArgs,
		RunE: runSynth,
	}
	f := cmd.Flags()
	f.String("source", "synthetic", "where conversations come from: "+strings.Join(sourceNames(), ", "))
	f.String("input", "", "input file of the source (sharegpt JSON/JSONL, a production trace)")
	f.Int("conversations", 0, "conversations to write (0: the source's default: 100 synthetic, all of a file)")
	f.Int64("seed", 0, "random seed; the same seed and inputs give the same trace")
	f.String("tokenizer", tokenizer.DefaultName, "token counting: o200k_base, cl100k_base, or a Hugging Face tokenizer.json path")
	f.String("text-file", "", "plain-text corpus for synthetic text (default: embedded generated prose)")
	f.StringP("output", "o", "trace.parquet", "trace file to write")
	f.Float64("rate", 0, "conversation starts per second; 0 or inf starts all at once")
	f.Float64("burstiness", 1.0, "gamma shape of start gaps: 1 Poisson, <1 burstier, >1 more regular")
	f.Duration("token-time", synth.DefaultTokenTime, "estimated time per output token for open-loop arrivals of later turns")
	for _, r := range synth.Registrations() {
		if r.Flags == nil {
			continue
		}
		fs := pflag.NewFlagSet(r.Name, pflag.ContinueOnError)
		r.Flags(fs)
		fs.VisitAll(func(fl *pflag.Flag) {
			if f.Lookup(fl.Name) == nil {
				f.AddFlag(fl)
			}
		})
	}
	return cmd
}

func sourceNames() []string {
	var names []string
	for _, r := range synth.Registrations() {
		names = append(names, r.Name)
	}
	return names
}

func sourceList() string {
	var b strings.Builder
	for _, r := range synth.Registrations() {
		fmt.Fprintf(&b, "  %-10s %s\n", r.Name, r.Summary)
	}
	return b.String()
}

func runSynth(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	name, _ := f.GetString("source")
	reg, ok := synth.Lookup(name)
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
	if n < 0 {
		return badInput(fmt.Errorf("--conversations %d must not be negative", n))
	}
	textFile, _ := f.GetString("text-file")
	progress := newProgress(cmd.ErrOrStderr(), name)
	defer progress.done()

	env := synth.Env{
		Flags: f, Input: input, Conversations: n, Seed: seed, Tokenizer: tok,
		Corpus:   sync.OnceValues(func() (*synth.Corpus, error) { return loadCorpus(textFile, tok) }),
		Progress: progress.report,
	}
	src, err := reg.New(env)
	if err != nil {
		return badInput(err)
	}
	var sched *synth.Schedule
	if !reg.Timed {
		rate, _ := f.GetFloat64("rate")
		burst, _ := f.GetFloat64("burstiness")
		tt, _ := f.GetDuration("token-time")
		sched = &synth.Schedule{Rate: rate, Burstiness: burst, TokenTime: tt}
		if err := sched.Validate(); err != nil {
			return badInput(fmt.Errorf("schedule: %w", err))
		}
	}
	created, err := synth.CreatedAt()
	if err != nil {
		return badInput(err)
	}
	out, _ := f.GetString("output")
	meta := trace.TraceMeta{
		TracekitVersion: trace.Version,
		Command:         commandLine(os.Args),
		Seed:            seed,
		Tokenizer:       tok.Name(),
		CreatedAt:       created,
		Options:         flagOptions(f, reg),
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, unix.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := synth.Generate(ctx, synth.Job{Source: src, Schedule: sched, Meta: meta, Output: out})
	progress.done()
	var outErr *synth.OutputError
	switch {
	case errors.As(err, &outErr), errors.Is(err, context.Canceled):
		return err
	case err != nil:
		return badInput(err)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "wrote %s: %d conversations, %d turns, %s, %.2fs (source %s, tokenizer %s, seed %d)\n",
		out, res.Conversations, res.Turns, byteSize(res.Bytes), time.Since(start).Seconds(), name, tok.Name(), seed)
	printOptions(w, res.Report)
	return nil
}

func loadCorpus(path string, tok tokenizer.Tokenizer) (*synth.Corpus, error) {
	if path == "" {
		return synth.DefaultCorpus(tok)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--text-file: %w", err)
	}
	c, err := synth.NewCorpus(string(b), tok)
	if err != nil {
		return nil, fmt.Errorf("--text-file %s: %w", path, err)
	}
	return c, nil
}

// commonFlags are recorded in every trace's metadata.
var commonFlags = []string{"source", "input", "conversations", "seed", "tokenizer", "text-file", "rate", "burstiness", "token-time"}

// flagOptions records in the metadata the common flags, the source's own
// flags (defaults included, so a trace says how it was made) and every
// flag given on the command line.
func flagOptions(f *pflag.FlagSet, reg synth.Registration) map[string]string {
	m := map[string]string{}
	add := func(name string) {
		if fl := f.Lookup(name); fl != nil {
			m[name] = fl.Value.String()
		}
	}
	for _, name := range commonFlags {
		add(name)
	}
	if reg.Flags != nil {
		own := pflag.NewFlagSet(reg.Name, pflag.ContinueOnError)
		reg.Flags(own)
		own.VisitAll(func(fl *pflag.Flag) { add(fl.Name) })
	}
	f.Visit(func(fl *pflag.Flag) { add(fl.Name) })
	return m
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
	p := &progress{w: w, label: label}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		p.tty = err == nil
	}
	return p
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
