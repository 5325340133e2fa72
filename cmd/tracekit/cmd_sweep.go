package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/sweep"
)

// sweepFlags are the sweep command's own flags (the replay settings go
// straight into a replay.Config).
type sweepFlags struct {
	out                               string
	speed, rate, conc, search, slo    string
	resolution                        string
	goodputTarget, maxErrorRate       float64
	maxClientCPU                      float64
	maxClientLag                      time.Duration
	maxSteps, retryDistorted          int
	stepRequests                      int
	stepDuration, stepTimeout, slices time.Duration
	drainTimeout, progressEvery       time.Duration
	progress                          string
	live                              liveFlags
	noEarlyStop                       bool
	apiKeyEnv                         string
	headers                           []string
	temperature                       float64
	scrape                            scrapeFlags
	repeat                            int
	runCooldown                       time.Duration
	confidence                        float64
}

// newSweepCmd builds the sweep command and its compare subcommand.
func newSweepCmd() *cobra.Command {
	var (
		f     sweepFlags
		c     replay.Config
		enums replayEnums
	)
	cmd := &cobra.Command{
		Use:   "sweep TRACE.parquet --target URL --out DIR [flags]",
		Short: "Run a trace at a ladder of loads, or search for the highest load that meets an SLO",
		Long: `sweep replays a trace at several loads, each step a fresh replay into its own
recording in DIR (step-NN-<axis>-<value>.parquet, with its analyze report .html),
and writes a summary: sweep.json, sweep.parquet (one row per step), sweep.html
(offline charts, every step linked) and sweep.txt (the table, also printed).

Load axes (one is swept; the others may be fixed with a single value):
  --speed     time scale of the captured traffic: 1x, 2x, ...
  --rate      conversation starts per second: run as speed R / (the trace's start rate)
  --max-concurrency  C virtual users: at most C conversations and C requests at once
Each takes a list (--speed 0.5,1,2,4) or "search" (or search:LO-HI; or --search speed:0.25-16).

A search needs --slo "ttft:p99:500ms tpot:p90:50ms": a step meets it when each stated
percentile is at most its threshold; per-request goodput (a request is good when each of
its metrics is within its threshold, as vLLM's --goodput) is reported, and required with
--goodput-target. The search doubles the load until a step fails, then bisects to
--resolution and reports the highest passing load with the two steps that bound it.

--repeat N runs every step N times (--run-cooldown between runs,
--reset-prefix-cache before each): a step's figures are the means across its
runs (an objective is judged on the mean of the runs' percentiles, the client's
health on the worst run), with the confidence interval of the steady and
output throughput (Student's t, N-1 degrees of freedom). The runs are STEP-1.parquet ... STEP-N.parquet, a run set that
analyze and compare take by the name STEP.parquet (STEP.html is its report).

Ctrl-C keeps every finished step and writes the summary so far (exit 130).
Exit codes: 0 done, 1 target unreachable or no step passed, 2 bad flags, 3 no step
passed and the lowest load met every objective but the client distorted it (its
dispatch lag, scheduler latency, send delay or CPU over --max-client-lag or
--max-client-cpu: it could not measure faithfully), 130 interrupted.`,
		Example: `  tracekit sweep trace.parquet --target http://127.0.0.1:8000 --out sweep1 --speed 0.5,1,2,4
  tracekit sweep trace.parquet --target http://gpu1:8000 --out sweep2 --search speed:0.5-16 \
      --slo "ttft:p99:500ms tpot:p90:50ms" --goodput-target 0.95 --step-requests 300 --warmup 20
  tracekit sweep compare sweep1 sweep2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Trace = args[0]
			c.APIKey = os.Getenv(f.apiKeyEnv)
			var err error
			if c.Headers, err = parseHeaders(f.headers); err != nil {
				return badInput(err)
			}
			if cmd.Flags().Changed("temperature") {
				c.Temperature = &f.temperature
			}
			if err := enums.parse(&c); err != nil {
				return err
			}
			c.Command = replay.RedactCommand(os.Args)
			c.AddSecrets(redact.FromContext(cmd.Context()))
			return runSweep(cmd, f, c)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "directory for the steps' recordings and the summary (created; must not hold a sweep)")
	fl.StringArrayVar(&c.Targets, "target", nil, "base URL of an OpenAI-compatible server (repeat for several)")
	fl.StringVar(&f.speed, "speed", "", `speed axis: a list "0.5,1,2,4", "search" or "search:LO-HI"; or one value to fix it`)
	fl.StringVar(&f.rate, "rate", "", `rate axis (conversation starts/s): a list, "search" or "search:LO-HI"; or one value to fix it`)
	fl.StringVar(&f.conc, "max-concurrency", "", `concurrency axis (virtual users): a list, "search" or "search:LO-HI"; or one value to fix it`)
	fl.StringVar(&f.search, "search", "", `search an axis over a range: speed:0.25-16, rate:1-64 or max-concurrency:1-256`)
	fl.StringVar(&f.slo, "slo", "", `SLO objectives METRIC:pP:THRESHOLD (ttft, tpot, itl, e2el), e.g. "ttft:p99:500ms tpot:p90:50ms"`)
	fl.Float64Var(&f.goodputTarget, "goodput-target", 0, "also require this fraction of requests to be good (per-request goodput), e.g. 0.95")
	fl.StringVar(&f.resolution, "resolution", "5%", "a search stops when the passing and failing loads are this close (hi/lo - 1)")
	fl.IntVar(&f.maxSteps, "max-steps", sweep.DefaultMaxSteps, "most steps a search runs")
	fl.Float64Var(&f.maxErrorRate, "max-error-rate", 0.01, "largest fraction of failed requests a passing step may have")
	fl.DurationVar(&f.maxClientLag, "max-client-lag", sweep.DefaultMaxClientLag, "a step whose dispatch lag, scheduler latency or send delay p99 exceeds this is distorted by the client")
	fl.Float64Var(&f.maxClientCPU, "max-client-cpu", sweep.DefaultMaxClientCPU, "a step whose client used more than this share of its cores is distorted")
	fl.IntVar(&f.retryDistorted, "retry-distorted", 1, "run a load whose step the client distorted again, up to this many times")
	fl.BoolVar(&f.noEarlyStop, "no-early-stop", false, "run every step to its end even once it is certain to fail")
	fl.IntVar(&f.stepRequests, "step-requests", 0, "measured requests per step (default 200 unless --step-duration)")
	fl.DurationVar(&f.stepDuration, "step-duration", 0, "send new requests for this long per step (instead of --step-requests)")
	fl.DurationVar(&f.slices, "slices", 0, "also cut each step into windows this long (e.g. 10s): offered rate, throughput, mean in flight, TTFT and ITL p50/p99 per window, in sweep.json")
	fl.DurationVar(&f.stepTimeout, "step-timeout", 10*time.Minute, "end a step after this long, canceling its requests in flight (0: none)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", time.Minute, "after a step, wait up to this long for the targets' /metrics to show no running or waiting request")
	fl.DurationVar(&f.progressEvery, "progress-every", 2*time.Second, "how often a step's progress is printed on stderr")
	fl.StringVar(&f.progress, "progress", "lines", "lines (a step's progress every --progress-every) or dashboard (each step's live figures on a terminal, else the lines)")
	f.live.register(fl)
	fl.IntVar(&c.Warmup, "warmup", 0, "the first N requests of every step are warm-up (not measured)")
	fl.Uint64Var(&c.Seed, "seed", 0, "seed of the synthesized text, the same for every step")
	fl.BoolVar(&c.ResetPrefixCache, "reset-prefix-cache", false, "POST /reset_prefix_cache to every target before every step (every run of a step with --repeat)")
	fl.IntVar(&f.repeat, "repeat", 1, "run every step N times (STEP-1.parquet ... STEP-N.parquet, one run set): the curve and the search read the means across runs, with their confidence intervals")
	fl.DurationVar(&f.runCooldown, "run-cooldown", 0, "with --repeat: pause this long between the runs of a step")
	fl.Float64Var(&f.confidence, "confidence", analyze.DefaultConfidence, "with --repeat: confidence level of the intervals across runs")
	fl.StringVar(&c.Model, "model", "", "model name (default: the first of the target's /v1/models)")
	fl.StringVar(&enums.endpoint, "endpoint", string(replay.EndpointChat), "the API of turns whose trace names none: chat, completions, responses, messages, embeddings, rerank or score")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the API key (never recorded)")
	fl.StringArrayVar(&f.headers, "header", nil, "extra request header K:V (repeatable)")
	fl.BoolVar(&c.IgnoreEOS, "ignore-eos", false, "ask the server to generate exactly max_tokens")
	fl.Float64Var(&f.temperature, "temperature", 0, "sampling temperature (default: the server's)")
	fl.StringVar(&c.ExtraBody, "extra-body", "", "JSON object merged into every request body")
	fl.StringVar(&c.SessionHeader, "session-header", "", "send each conversation's session key in this header (e.g. X-Session-ID) for a KV-cache-aware router")
	fl.StringVar(&c.SessionField, "session-field", "", "user: send the session key in the body's user field (messages: metadata.user_id)")
	fl.BoolVar(&c.SessionPerAgent, "session-per-agent", false, "agent graphs: a key per agent context, not one per session")
	fl.StringVar(&c.ContinuousUsage, "continuous-usage", "auto", "ask for continuous_usage_stats: auto, on, off")
	fl.StringVar(&enums.timing, "timing", string(replay.TimingClosed), "closed or trace (see replay)")
	fl.StringVar(&enums.history, "history", string(replay.HistoryActual), "actual or reference (see replay)")
	fl.DurationVar(&c.RequestTimeout, "request-timeout", 0, "per-request limit (0: none)")
	fl.DurationVar(&c.IdleTimeout, "idle-timeout", 60*time.Second, "longest silence between two stream reads (0: none)")
	fl.DurationVar(&c.ReadyTimeout, "ready-timeout", 0, "wait up to this long for the targets to be ready before each step")
	fl.DurationVar(&c.DialTimeout, "dial-timeout", 10*time.Second, "TCP connect timeout")
	fl.BoolVar(&c.Insecure, "insecure", false, "accept any TLS certificate from an https:// target")
	f.scrape.register(fl, "target")
	cmd.MarkFlagRequired("target")
	cmd.MarkFlagRequired("out")
	cmd.AddCommand(newSweepCompareCmd())
	return cmd
}

// newSweepCompareCmd builds `tracekit sweep compare DIR_A DIR_B`.
func newSweepCompareCmd() *cobra.Command {
	var htmlPath string
	cmd := &cobra.Command{
		Use:   "compare DIR_A DIR_B [--html FILE]",
		Short: "Compare two sweeps: their SLO answers, knees and curves",
		Long: `compare reads the sweep.json of two sweep directories and prints their SLO
answers (in each axis' load when the axes agree, and as offered conversations and
served requests per second, which compare across speed and rate), knees and
highest throughputs with the change from A to B, then both step tables. --html
writes one offline page with both sweeps' curves on shared charts.`,
		Example: `  tracekit sweep compare before/ after/ --html compare.html`,
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s [2]*sweep.Summary
			for i, dir := range args {
				var err error
				if s[i], err = sweep.ReadSummary(dir); err != nil {
					return badInput(err)
				}
			}
			if err := sweep.WriteCompare(cmd.OutOrStdout(), s[0], s[1], args[0], args[1]); err != nil {
				return err
			}
			if htmlPath == "" {
				return nil
			}
			base := filepath.Dir(htmlPath)
			href := func(dir string) string {
				p, err := filepath.Rel(base, filepath.Join(dir, sweep.SummaryHTML))
				if err != nil {
					return ""
				}
				return filepath.ToSlash(p)
			}
			return sweep.WriteFileAtomic(htmlPath, func(w io.Writer) error {
				return sweep.WriteCompareHTML(w, s[0], s[1], args[0], args[1], href(args[0]), href(args[1]))
			})
		},
	}
	cmd.Flags().StringVar(&htmlPath, "html", "", "also write the comparison as one offline HTML page")
	return cmd
}

// axisFlag is one load-axis flag as given.
type axisFlag struct {
	axis   sweep.Axis
	flag   string
	ladder []float64
	search bool
	lo, hi float64
}

// plan resolves the axis flags: exactly one axis is swept (a list of
// several values or a search); the others may hold one fixed value.
func (f *sweepFlags) plan(cmd *cobra.Command, hasSLO bool) (sweep.Plan, map[sweep.Axis]float64, error) {
	var given []axisFlag
	for _, x := range []struct {
		axis sweep.Axis
		flag string
		val  string
	}{{sweep.AxisSpeed, "speed", f.speed}, {sweep.AxisRate, "rate", f.rate}, {sweep.AxisConcurrency, "max-concurrency", f.conc}} {
		if !cmd.Flags().Changed(x.flag) {
			continue
		}
		l, s, lo, hi, err := sweep.ParseValues(x.axis, x.val)
		if err != nil {
			return sweep.Plan{}, nil, fmt.Errorf("--%s %w", x.flag, err)
		}
		given = append(given, axisFlag{x.axis, x.flag, l, s, lo, hi})
	}
	if f.search != "" {
		a, lo, hi, err := sweep.ParseSearch(f.search)
		if err != nil {
			return sweep.Plan{}, nil, fmt.Errorf("--search %q: %w", f.search, err)
		}
		for _, g := range given {
			if g.axis == a {
				return sweep.Plan{}, nil, fmt.Errorf("--search %s and --%s both name the %s axis: give one", f.search, g.flag, a)
			}
		}
		given = append(given, axisFlag{a, "search", nil, true, lo, hi})
	}
	var swept *axisFlag
	fixed := map[sweep.Axis]float64{}
	for i := range given {
		g := &given[i]
		if g.search || len(g.ladder) > 1 {
			if swept != nil {
				return sweep.Plan{}, nil, fmt.Errorf("--%s and --%s both sweep an axis: sweep one and give the others one value", swept.flag, g.flag)
			}
			swept = g
			continue
		}
		fixed[g.axis] = g.ladder[0]
	}
	if _, s := fixed[sweep.AxisSpeed]; s || (swept != nil && swept.axis == sweep.AxisSpeed) {
		if _, r := fixed[sweep.AxisRate]; r || (swept != nil && swept.axis == sweep.AxisRate) {
			return sweep.Plan{}, nil, errors.New("--speed and --rate both set the time scale: give one")
		}
	}
	switch {
	case swept == nil && len(given) == 1: // one value: a one-step sweep on that axis
		swept = &given[0]
		delete(fixed, swept.axis)
	case swept == nil && len(given) == 0 && hasSLO:
		swept = &axisFlag{axis: sweep.AxisSpeed, flag: "speed", search: true}
	case swept == nil:
		return sweep.Plan{}, nil, errors.New(`name the load axis: --speed, --rate or --max-concurrency with a list such as 0.5,1,2,4, or "search" (with --slo)`)
	}
	if swept.search && !hasSLO {
		return sweep.Plan{}, nil, fmt.Errorf("--%s: a search needs --slo to tell passing steps", swept.flag)
	}
	p := sweep.Plan{Axis: swept.axis, Ladder: swept.ladder}
	if swept.search {
		p.Ladder = nil
		p.Search = &sweep.SearchSpec{Start: swept.lo, Min: swept.lo, Max: swept.hi, MaxSteps: f.maxSteps}
	}
	return p, fixed, nil
}

// runSweep validates the flags, runs the sweep under signal handling,
// writes the summary after every step and reports.
func runSweep(cmd *cobra.Command, f sweepFlags, c replay.Config) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var crit sweep.Criteria
	var err error
	if f.slo != "" {
		if crit.SLO, err = sweep.ParseSLO(f.slo); err != nil {
			return badInput(fmt.Errorf("--slo %w", err))
		}
	}
	crit.GoodputTarget, crit.MaxErrorRate, crit.MaxClientLag, crit.MaxClientCPU = f.goodputTarget, f.maxErrorRate, f.maxClientLag, f.maxClientCPU
	if f.goodputTarget < 0 || f.goodputTarget > 1 {
		return badInput(fmt.Errorf("--goodput-target %g: expected a fraction in [0, 1], e.g. 0.95", f.goodputTarget))
	}
	if f.goodputTarget > 0 && f.slo == "" {
		return badInput(errors.New("--goodput-target: needs --slo to tell good requests"))
	}
	if f.maxErrorRate < 0 || f.maxErrorRate > 1 {
		return badInput(fmt.Errorf("--max-error-rate %g: expected a fraction in [0, 1]", f.maxErrorRate))
	}
	if f.maxClientLag <= 0 || f.maxClientCPU <= 0 {
		return badInput(errors.New("--max-client-lag and --max-client-cpu: expected positive values"))
	}
	res, err := sweep.ParseResolution(f.resolution)
	if err != nil {
		return badInput(fmt.Errorf("--resolution %w", err))
	}
	if f.maxSteps < 1 || f.retryDistorted < 0 {
		return badInput(errors.New("--max-steps: expected 1 or more; --retry-distorted: 0 or more"))
	}
	if f.stepRequests > 0 && f.stepDuration > 0 {
		return badInput(errors.New("--step-requests and --step-duration: give one"))
	}
	if f.stepRequests < 0 || f.stepDuration < 0 || f.stepTimeout < 0 {
		return badInput(errors.New("--step-requests, --step-duration, --step-timeout: expected positive values"))
	}
	if f.stepRequests == 0 && f.stepDuration == 0 {
		f.stepRequests = 200
	}
	if f.progressEvery <= 0 {
		return badInput(fmt.Errorf("--progress-every %v: expected a positive duration", f.progressEvery))
	}
	if f.progress != "lines" && f.progress != "dashboard" {
		return badInput(fmt.Errorf("--progress %q: expected lines or dashboard", f.progress))
	}
	if err := f.live.validate(); err != nil {
		return badInput(err)
	}
	plan, fixed, err := f.plan(cmd, len(crit.SLO) > 0)
	if err != nil {
		return badInput(err)
	}
	if err := checkOut(f.out); err != nil {
		return badInput(err)
	}

	if f.slices < 0 {
		return badInput(fmt.Errorf("--slices %v: expected a duration above 0 (or 0 for none)", f.slices))
	}
	o := sweep.ReplayOptions{Base: c, Dir: f.out, StepRequests: f.stepRequests, StepDuration: f.stepDuration, Slices: f.slices,
		StepTimeout: f.stepTimeout, DrainTimeout: f.drainTimeout, Criteria: crit, EarlyStop: !f.noEarlyStop,
		Progress: stderr, ProgressEvery: f.progressEvery,
		Speed: fixed[sweep.AxisSpeed], Rate: fixed[sweep.AxisRate], MaxConcurrency: int(fixed[sweep.AxisConcurrency])}
	if err := f.scrape.validate(); err != nil {
		return badInput(err)
	}
	if f.scrape.insecure = c.Insecure; f.scrape.enabled() { // one sidecar per step, beside its recording
		so := f.scrape.sidecarOptions(c.Targets)
		o.Scrape = &so
	}
	dashboard := f.progress == "dashboard" && isTerminal(stderr)
	if f.progress == "dashboard" && !dashboard {
		fmt.Fprintln(stderr, "--progress dashboard: stderr is not a terminal, printing the progress lines instead")
	}
	if dashboard || f.live.serveUI != "" {
		sl := startStepsLive(dashboard, &f.live, stderr)
		defer sl.stop()
		o.StepView, o.StepDraws = sl.step, dashboard
	}
	if f.repeat < 1 {
		return badInput(fmt.Errorf("--repeat %d: expected 1 or more", f.repeat))
	}
	if f.runCooldown < 0 {
		return badInput(fmt.Errorf("--run-cooldown %s: expected a duration of 0 or more", f.runCooldown))
	}
	if err := checkConfidence(f.confidence); err != nil {
		return err
	}
	st, err := sweep.NewReplayStepper(o)
	if err != nil {
		return badInput(err)
	}
	var stepper sweep.Stepper = st
	if f.repeat > 1 {
		stepper = &sweep.RepeatStepper{Inner: st, Runs: f.repeat, Cooldown: f.runCooldown, Confidence: f.confidence,
			Dir: f.out, Options: sweep.AnalyzeOptions(crit.SLO)}
	}
	if s := plan.Search; s != nil {
		s.Resolution = res
		if s.Start == 0 { // "search" without a range: the axis' defaults
			switch plan.Axis {
			case sweep.AxisSpeed:
				s.Start, s.Min, s.Max = 1, 1.0/16, 256
			case sweep.AxisRate:
				r := st.TraceRate()
				if r <= 0 {
					return badInput(errors.New("--rate search: the trace's conversations all start at once, so it has no rate to start from: give search:LO-HI"))
				}
				s.Start, s.Min, s.Max = r, r/16, r*256
			case sweep.AxisConcurrency:
				s.Start, s.Min, s.Max = 1, 1, 4096
			}
		}
	}
	if err := plan.Validate(); err != nil {
		return badInput(err)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return badInput(fmt.Errorf("--out %s: %w", f.out, err))
	}

	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	context.AfterFunc(ctx, stopSignals)

	if err := st.Preflight(ctx); err != nil {
		if ctx.Err() != nil {
			return interrupted(errors.New("interrupted before the first step"))
		}
		return runFailed(err)
	}
	var writeErr error
	cfg := sweep.Config{Plan: plan, Criteria: crit, RetryDistorted: f.retryDistorted,
		Info: sweep.Info{Command: c.Command, Trace: c.Trace, Targets: c.Targets, TraceRate: st.TraceRate(), Setup: map[string]any{
			"step_requests": f.stepRequests, "step_duration": f.stepDuration.String(), "warmup": c.Warmup, "seed": c.Seed,
			"reset_prefix_cache": c.ResetPrefixCache, "early_stop": !f.noEarlyStop, "fixed": fixedNames(fixed), "repeat": f.repeat}},
		OnStep: func(s *sweep.Summary) {
			r := &s.Steps[len(s.Steps)-1]
			fmt.Fprintf(stderr, "step %d %s: %s, %s req/s", r.Index, r.Load, strings.ToUpper(r.Verdict), fmtRate(r.Throughput))
			if len(r.Reasons) > 0 {
				fmt.Fprintf(stderr, " (%s)", r.Reasons[0])
			}
			if r.Distorted {
				fmt.Fprintf(stderr, " (%s)", strings.Join(r.Distortions, "; "))
			}
			fmt.Fprintln(stderr)
			if err := s.WriteAll(f.out); err != nil && writeErr == nil {
				writeErr = err
				fmt.Fprintln(stderr, "warning:", err)
			}
		}}
	sum, runErr := sweep.Run(ctx, stepper, cfg)
	if sum == nil {
		return badInput(runErr)
	}
	if err := sum.WriteAll(f.out); err != nil {
		return err
	}
	if err := sum.WriteText(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "summary: %s\n", filepath.Join(f.out, sweep.SummaryHTML))
	switch {
	case sum.Interrupted:
		return interrupted(fmt.Errorf("interrupted: %d finished steps kept in %s", len(sum.Steps), f.out))
	case runErr != nil:
		return runFailed(runErr)
	}
	passed := false
	for _, r := range sum.Steps {
		passed = passed || r.Pass
	}
	// The answer above says why in full; the error only points at it.
	txt := filepath.Join(f.out, sweep.SummaryText)
	switch {
	case passed:
		return nil
	case sum.Unmeasured() != nil:
		return unmeasured(fmt.Errorf("no answer: the client could not measure faithfully (the answer in %s names the figures)", txt))
	case sum.Answer != nil:
		return runFailed(fmt.Errorf("no load met the SLO (see the answer in %s)", txt))
	}
	return runFailed(fmt.Errorf("no step passed (see %s)", txt))
}

// checkOut refuses an output directory that already holds a sweep: a
// sweep never replaces recordings.
func checkOut(dir string) error {
	if dir == "" {
		return errors.New("--out: expected a directory")
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--out %s: not a directory", dir)
	}
	steps, _ := filepath.Glob(filepath.Join(dir, "step-*.parquet"))
	if _, err := os.Stat(filepath.Join(dir, sweep.SummaryJSON)); err == nil || len(steps) > 0 {
		return fmt.Errorf("--out %s already holds a sweep: choose a new directory (a sweep never replaces recordings)", dir)
	}
	return nil
}

func fixedNames(m map[sweep.Axis]float64) map[string]float64 {
	out := map[string]float64{}
	for a, v := range m {
		out[string(a)] = v
	}
	return out
}

func fmtRate(v float64) string {
	if v <= 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
