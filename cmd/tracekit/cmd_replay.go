package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/live"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/synth"
	"github.com/tracekit/tracekit/trace"
)

// newReplayCmd builds the replay command.
func newReplayCmd() *cobra.Command {
	var (
		c                replay.Config
		o                replayOpts
		apiKeyEnv, shard string
		headers          []string
		temperature      float64
		cancelAfter      string
		dispatcher       string
		enums            replayEnums
		d                distOpts
		scrape           scrapeFlags
		lf               liveFlags
	)
	cmd := &cobra.Command{
		Use:   "replay TRACE.parquet --target URL [flags]",
		Short: "Send a trace to a server with exact timing and write a recording",
		Long: `replay sends every request of a trace at its intended time and records the raw
timestamp of every streamed token event. Each conversation is a closed loop by
default: turn k+1 leaves its think time after the answer to turn k ended, with the
server's answers in its history (--history reference: the trace's answers).
--timing trace sends every turn at its own arrival time instead (open loop).

The run waits for the targets (--ready-timeout) before its clock starts. Ctrl-C,
SIGTERM or --benchmark-timeout end it with a valid recording: finished requests
as they were, in-flight ones marked canceled with their partial events. A second
Ctrl-C exits at once (tracekit recover then rebuilds the file from its journal).
The API key is read from the environment (--api-key-env) and never written.

--repeat N (alias --num-runs) replays the trace N times (--run-cooldown
between runs; --reset-prefix-cache resets before every run), each
run its own complete recording OUT-1..OUT-N (run.parquet: run-1.parquet, ...),
then prints per metric the mean across runs, the sample standard deviation and
the --confidence interval of the mean (Student's t, N-1 degrees of freedom).
An interrupted run ends the set: the runs before it stay complete.

Distributed runs (docs/distributed.md): --shards N with
the index from $JOB_COMPLETION_INDEX, -o with {shard}, one --start-at instant
for every shard, a shared --run-id; TRACE may be an http(s) URL (downloaded
beside the output, verified, removed after).`,
		Example: `  tracekit replay trace.parquet --target http://127.0.0.1:8000 -o run.parquet
  tracekit replay trace.parquet --target http://gpu1:8000 --target http://gpu2:8000 \
      --max-concurrency 256 --warmup 20 --benchmark-timeout 30m --ignore-eos`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Trace = args[0]
			c.APIKey = os.Getenv(apiKeyEnv)
			var err error
			if c.Headers, err = parseHeaders(headers); err != nil {
				return badInput(err)
			}
			if c.Shard, c.Shards, err = parseShard(shard); err != nil {
				return badInput(err)
			}
			if err := d.apply(cmd.Flags(), &c, &o, os.Getenv); err != nil {
				return badInput(err)
			}
			o.dist = d
			if cmd.Flags().Changed("temperature") {
				c.Temperature = &temperature
			}
			if c.CancelRate > 0 || cmd.Flags().Changed("cancel-after") {
				if c.CancelAfter, err = synth.ParseDist(cancelAfter, synth.Seconds); err != nil {
					return badInput(fmt.Errorf("--cancel-after: %w", err))
				}
			}
			c.EndpointOverride = cmd.Flags().Changed("endpoint")
			if err := enums.parse(&c); err != nil {
				return err
			}
			switch dispatcher {
			case "precise":
			case "sleep":
				c.Dispatcher = replay.SleepDispatcher{}
			default:
				return badInput(fmt.Errorf("--dispatcher %q: expected precise or sleep", dispatcher))
			}
			stderr := cmd.ErrOrStderr()
			c.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
			c.Command = replay.RedactCommand(os.Args)
			c.AddSecrets(redact.FromContext(cmd.Context()))
			if c.Speed <= 0 {
				return badInput(fmt.Errorf("--speed %g: expected a positive factor", c.Speed))
			}
			if !cmd.Flags().Changed("max-error-rate") {
				o.maxErrorRate = -1
			} else if o.maxErrorRate < 0 {
				return badInput(fmt.Errorf("--max-error-rate %g: expected a fraction from 0 to 1", o.maxErrorRate))
			}
			if err := scrape.validate(); err != nil {
				return badInput(err)
			}
			if _, err := replay.ParseStampMode(c.StampMode); err != nil {
				return badInput(err)
			}
			if err := lf.validate(); err != nil {
				return badInput(err)
			}
			scrape.insecure, o.scrape, o.live = c.Insecure, &scrape, &lf
			return runReplays(cmd, c, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", "recording.parquet", "recording to write (never replaced unless --force)")
	f.BoolVar(&o.force, "force", false, "replace an existing recording (once the new one is complete)")
	f.Float64Var(&o.maxErrorRate, "max-error-rate", 0, "exit 1 when more than this fraction of requests failed (default: only when all did)")
	f.StringArrayVar(&c.Targets, "target", nil, "base URL of an OpenAI-compatible server (repeat for several)")
	f.StringVar(&enums.policy, "target-policy", string(replay.PolicyRoundRobin), "with several targets: round-robin (per request) or conversation (sticky)")
	f.StringVar(&enums.endpoint, "endpoint", string(replay.EndpointChat), "the API every turn is sent on when given: chat, completions, responses, messages, embeddings, rerank, score, transcriptions or translations (default: each turn's own, chat for those without)")
	f.StringVar((*string)(&c.ResponsesState), "responses-state", string(replay.ResponsesClient), "how a Responses conversation carries its history: client (whole, as input items) or server (previous_response_id and the new items; closed loop)")
	f.StringVar(&c.ReasoningEffort, "reasoning-effort", "", "low, medium or high: Responses' reasoning.effort, chat's reasoning_effort (default: not sent)")
	f.IntVar(&c.ThinkingBudget, "thinking-budget", 0, "Messages: ask for extended thinking with this many budget tokens (0: not sent)")
	f.StringVar(&c.MediaURLBase, "media-url-base", "", "serve the trace's images, video and audio from this host at this http URL (e.g. http://127.0.0.1:8089/media; port 0: any) and send their URLs instead of data URIs")
	f.StringVar(&c.MediaFile, "media-file", "", "the media file holding the bytes of the trace's real images, video and audio, a path or, for a trace URL, an http(s) URL (default: the trace's own path or URL with .media added)")
	f.StringVar(&c.Model, "model", "", "model name (default: the first of the target's /v1/models)")
	f.StringVar(&apiKeyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the API key (sent as a Bearer token, as x-api-key on messages; never recorded)")
	f.StringArrayVar(&headers, "header", nil, "extra request header K:V (repeatable)")
	f.BoolVar(&c.IgnoreEOS, "ignore-eos", false, "ask the server to generate exactly max_tokens (vLLM, SGLang)")
	f.BoolVar(&c.MockHints, "mock-hints", false, "tracekit mock only: send the trace's recorded tool-call count and names and reasoning tokens (X-Tracekit-Tool-Calls/-Names, X-Tracekit-Reasoning-Tokens) so the mock answers them")
	f.StringVar(&c.SessionHeader, "session-header", "", "send each conversation's session key in this header (e.g. X-Session-ID), so a KV-cache-aware router keeps it on one engine (default: none)")
	f.StringVar(&c.SessionField, "session-field", "", "user: send the session key in the body's user field (messages: metadata.user_id)")
	f.BoolVar(&c.SessionPerAgent, "session-per-agent", false, "agent graphs: a key per agent context (a sub-agent with a context of its own gets its own), not one per session")
	f.DurationVar(&c.ConcurrencyRampDuration, "concurrency-ramp-duration", 0, "raise the requests in flight from 1 to --max-concurrency linearly over this time (0: all from the start)")
	f.Float64Var(&c.CancelRate, "cancel-rate", 0, "fraction of requests to cancel on purpose mid-request, as users who give up (0-1; recorded as canceled_by_client)")
	f.StringVar(&cancelAfter, "cancel-after", "1s", "when a canceled request is closed, after its send began: a distribution of durations (e.g. 500ms, 200ms-2s)")
	f.Float64Var(&temperature, "temperature", 0, "sampling temperature (default: the server's)")
	f.StringVar(&c.ExtraBody, "extra-body", "", `JSON object merged into every request body, e.g. '{"top_p":0.9}'`)
	f.StringVar(&c.ContinuousUsage, "continuous-usage", "auto", "ask for continuous_usage_stats (exact tokens per event): auto (probe), on, off")
	f.StringVar(&enums.timing, "timing", string(replay.TimingClosed), "closed (think time after each answer) or trace (every turn at its arrival time)")
	f.StringVar(&enums.history, "history", string(replay.HistoryActual), "history carried between turns: actual (server answers) or reference (trace answers)")
	f.Float64Var(&c.Speed, "speed", 1, "time scale of start offsets and think times: 2 replays twice as fast")
	f.Uint64Var(&c.Seed, "seed", 0, "seed of the text synthesized for redacted messages")
	f.StringVar(&shard, "shard", "0/1", "replay shard i of n (conversations hashed by id): for distributed runs")
	f.IntVar(&c.MaxConcurrency, "max-concurrency", 0, "requests in flight at most; waiting is recorded as queue time (0: no limit)")
	f.IntVar(&c.MaxActiveConversations, "max-active-conversations", 0, "conversations in progress at most (0: no limit)")
	f.IntVar(&c.MaxRequests, "max-requests", 0, "stop after this many measured requests (0: the whole trace)")
	f.IntVar(&c.Warmup, "warmup", 0, "mark the first N requests as warm-up (analyze excludes them)")
	f.DurationVar(&c.Duration, "duration", 0, "stop sending new requests after this long (in-flight ones finish)")
	f.DurationVar(&c.RequestTimeout, "request-timeout", 0, "per-request limit, send to last byte (0: none)")
	f.DurationVar(&c.IdleTimeout, "idle-timeout", 60*time.Second, "longest silence between two stream reads (0: none)")
	f.DurationVar(&c.BenchmarkTimeout, "benchmark-timeout", 0, "end the whole run after this long, canceling in-flight requests (0: none)")
	f.DurationVar(&c.ReadyTimeout, "ready-timeout", 0, "wait up to this long for /health or /v1/models to answer before starting (0: no wait)")
	f.DurationVar(&c.DialTimeout, "dial-timeout", 10*time.Second, "TCP connect timeout")
	f.DurationVar(&c.IdleConnTimeout, "idle-conn-timeout", replay.DefaultIdleConnTimeout, "never reuse a keep-alive connection idle longer than this (below the server's own limit: uvicorn closes after 5s)")
	f.StringVar(&c.StampMode, "stamp", "", "how event arrivals are stamped: kernel-offset, kernel (SO_TIMESTAMPING receive stamps, Linux) or goroutine; default "+replay.DefaultStampMode+" where supported (the mode used is in the recording's metadata)")
	f.BoolVar(&c.Insecure, "insecure", false, "accept any TLS certificate from an https:// target (self-signed test deployments)")
	f.BoolVar(&c.ResetPrefixCache, "reset-prefix-cache", false, "POST /reset_prefix_cache to every target before the run (before every run with --repeat)")
	f.BoolVar(&c.NoProbe, "no-probe", false, "skip the tiny request that checks each target and the model before the clock starts (--continuous-usage auto is then off)")
	f.StringVar(&dispatcher, "dispatcher", "precise", "precise (absolute CLOCK_MONOTONIC timerfd in Go's poller, adaptive early release and spin) or sleep (Go timers, for comparison)")
	f.StringVar(&o.progress, "progress", "auto", "auto (a bar on a terminal, else a line every 10 s), bar, dashboard (live figures on a terminal, else the line), plain or none")
	f.BoolVar(&o.noAnalyze, "no-analyze", false, "do not print the analysis at the end")
	f.IntVar(&o.numRuns, "repeat", 1, "run the whole trace N times, each its own recording OUT-1..OUT-N, then print each metric's mean and confidence interval across runs (alias --num-runs)")
	f.DurationVar(&o.runCooldown, "run-cooldown", 0, "with --repeat: pause this long between runs")
	f.Float64Var(&o.confidence, "confidence", analyze.DefaultConfidence, "with --repeat: confidence level of the intervals across runs")
	f.SetNormalizeFunc(repeatAlias)
	d.register(f)
	scrape.register(f, "target")
	lf.register(f)
	cmd.MarkFlagRequired("target")
	return cmd
}

// replayOpts are the command's own options around replay.Config.
type replayOpts struct {
	out, progress string
	noAnalyze     bool
	force         bool
	maxErrorRate  float64 // < 0: not given
	numRuns       int
	runCooldown   time.Duration
	confidence    float64
	dist          distOpts
	scrape        *scrapeFlags
	live          *liveFlags
}

// runReplay checks the output, prepares the run (nothing is written if
// the targets fail), opens the recording, runs the replay under signal
// handling, closes the recording and reports. Exit codes: 2 for bad
// input or an existing recording without --force, 1 when the targets
// fail before the run, no request succeeded or the error rate is above
// --max-error-rate, 130 when a signal cut the run short (the recording is
// complete and valid).
func runReplay(cmd *cobra.Command, c replay.Config, o replayOpts) error {
	stderr := cmd.ErrOrStderr()
	if o.maxErrorRate > 1 || math.IsNaN(o.maxErrorRate) {
		return badInput(fmt.Errorf("--max-error-rate %g: expected a fraction from 0 to 1", o.maxErrorRate))
	}
	// Held until the command ends: a second run on the same -o refuses
	// before it reads, checks or writes anything of this one's.
	lock, err := lockOutput(o.out)
	if err != nil {
		return err
	}
	defer lock.Release()
	if _, err := os.Stat(o.out); err == nil && !o.force {
		return badInput(fmt.Errorf("%s exists: pass --force to replace it (the new recording replaces it only once complete)", o.out))
	}
	if err := o.scrape.checkSidecar(o.out, o.force); err != nil {
		return badInput(err)
	}
	removeTrace, err := fetchTrace(&c, o.out, o.dist)
	if err != nil {
		return err
	}
	defer removeTrace()
	// The first SIGINT/SIGTERM ends the run cleanly; once it has, signals
	// get their default action again, so a second one kills at once.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			cancel(fmt.Errorf("%v received", s))
		case <-ctx.Done():
		}
	}()

	// The recording is created only once the targets passed Prepare.
	var rec *record.Recorder
	var scr *runScrape
	stopProgress := func() {}
	var lv *liveRun
	open := func(r *replay.Runner) (record.Sink, error) {
		var err error
		ro := record.RecorderOptions{Queue: max(1024, 2*c.MaxConcurrency), Lock: lock,
			Scrub: redact.FromContext(cmd.Context())}
		var feed *live.Feed
		if wantLive(o.progress, o.live, stderr) {
			feed = live.NewFeed(0)
			ro.Tap = feed.Offer // the recorder's writer feeds the view, never a request
		}
		rec, err = record.NewRecorder(o.out, trace.RunMeta{TracekitVersion: trace.Version, Targets: c.Targets, Command: c.Command}, ro)
		if err != nil {
			return nil, err
		}
		if rv := rec.Recovered(); rv != nil {
			fmt.Fprintf(stderr, "a killed earlier run left %s: its %d records are rescued in %s\n", rv.Journal, rv.Records, rv.Out)
		}
		stopProgress = startProgress(stderr, r, o.progress)
		// The scraper starts with the run, so its clock and the recording's agree.
		var sink record.Sink
		scr, sink = startRunScrape(ctx, o.scrape, c.Targets, o.out, o.force, rec, stderr)
		if feed != nil {
			lv = startLive(feed, replaySources(r, scr), "replay "+o.out, o.progress == "dashboard" && isTerminal(stderr), o.live, stderr)
		}
		return sink, nil
	}
	res, runErr := replay.Record(ctx, c, nil, open)
	stopProgress()
	lv.stop()
	scr.finish(stderr)
	var cfgErr *replay.ConfigError
	var prepErr *replay.PrepareError
	switch {
	case errors.As(runErr, &cfgErr):
		return badInput(cfgErr.Err)
	case errors.As(runErr, &prepErr):
		if ctx.Err() != nil {
			return interrupted(fmt.Errorf("before the run started: %w", context.Cause(ctx)))
		}
		return runFailed(fmt.Errorf("preparing the replay of %s (nothing was sent, %s untouched): %w", c.Trace, o.out, prepErr.Err))
	case rec == nil:
		return runErr // the recording could not be created
	}
	if res == nil && runErr != nil {
		return notStarted(rec, ctx, o.dist, runErr)
	}
	var traceErr *replay.TraceError
	if errors.As(runErr, &traceErr) || errors.Is(runErr, trace.ErrInvalidTurn) || errors.Is(runErr, trace.ErrMediaDamaged) {
		return badTraceMidway(rec, res, c.Trace, o.out, runErr)
	}
	closeErr := rec.Close()
	if runErr != nil {
		return fmt.Errorf("replaying %s: %w", c.Trace, runErr)
	}
	if closeErr != nil {
		return fmt.Errorf("writing %s: %w", o.out, closeErr)
	}

	analyzed := false // the analysis prints the health warnings itself
	if !o.noAnalyze {
		if s, err := analyze.Files([]string{o.out}, analyze.Options{}); err != nil {
			fmt.Fprintf(stderr, "analyze: %v\n", err)
		} else if err := s.WriteText(cmd.OutOrStdout()); err != nil {
			return err
		} else {
			analyzed = true
		}
	}
	if h := res.Meta.Health; h != nil && !analyzed {
		for _, w := range h.Warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "recording: %s (%d requests, %d errors)\n", o.out, res.Sent, res.Errors)
	if res.CanceledByClient > 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "canceled on purpose: %d requests (--cancel-rate; not errors)\n", res.CanceledByClient)
	}
	if res.ParentFailed > 0 || res.ToolCallMismatches > 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "graphs: %d requests not sent (parent_failed), %d tool-call mismatches\n", res.ParentFailed, res.ToolCallMismatches)
	}
	if res.Canceled != "" {
		fmt.Fprintf(stderr, "the run was cut short (%s); in-flight requests are recorded as canceled\n", res.Canceled)
		if ctx.Err() != nil {
			return interrupted(fmt.Errorf("%v; %s is complete", context.Cause(ctx), o.out))
		}
	}
	if res.Sent > 0 && o.maxErrorRate >= 0 {
		if rate := float64(res.Errors) / float64(res.Sent); rate > o.maxErrorRate {
			return runFailed(fmt.Errorf("%d of %d requests failed (%.3g), above --max-error-rate %g", res.Errors, res.Sent, rate, o.maxErrorRate))
		}
	}
	if res.Sent > 0 && res.Errors == res.Sent {
		return runFailed(fmt.Errorf("no request succeeded: all %d failed (see error_kind in %s)", res.Sent, o.out))
	}
	return nil
}

// badTraceMidway ends a run whose trace turned out unreadable after it
// started (a damaged page, an invalid row): bad input. What was sent is
// kept as a complete recording, or, when nothing was, no recording is
// left to block the next run; the message says which.
func badTraceMidway(rec *record.Recorder, res *replay.Result, tracePath, out string, runErr error) error {
	if res.Sent == 0 {
		if err := rec.Discard(); err != nil {
			return badInput(fmt.Errorf("replaying %s: %w (and discarding the empty recording: %v)", tracePath, runErr, err))
		}
		return badInput(fmt.Errorf("replaying %s: %w; nothing was sent, so no recording was written", tracePath, runErr))
	}
	if err := rec.Close(); err != nil {
		return badInput(fmt.Errorf("replaying %s: %w (and writing %s: %v)", tracePath, runErr, out, err))
	}
	return badInput(fmt.Errorf("replaying %s: %w; %s holds the %d requests sent before it, complete and valid", tracePath, runErr, out, res.Sent))
}

// lockOutput creates the directory of out and takes the lock of out for
// this process (record.LockOutput); another live run writing it is bad
// input naming that process.
func lockOutput(out string) (*record.OutputLock, error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, badInput(fmt.Errorf("-o %s: creating its directory: %w", out, err))
	}
	lock, err := record.LockOutput(out)
	var le *record.LockedError
	if errors.As(err, &le) {
		return nil, badInput(fmt.Errorf("-o %w", err))
	}
	return lock, err
}

// startProgress prints progress until the returned function is called.
func startProgress(w io.Writer, r *replay.Runner, mode string) func() {
	if mode == "dashboard" {
		if isTerminal(w) {
			return func() {} // the live dashboard shows the progress
		}
		fmt.Fprintln(w, "--progress dashboard: stderr is not a terminal, printing a progress line every 10 s instead")
		mode = "plain"
	}
	if mode == "auto" {
		mode = "plain"
		if isTerminal(w) {
			mode = "bar"
		}
	}
	if mode == "none" {
		return func() {}
	}
	every := 10 * time.Second
	if mode == "bar" {
		every = 250 * time.Millisecond
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if mode == "bar" {
					fmt.Fprintf(w, "\r%s\n", progressLine(r.Stats(), 30))
				}
				return
			case <-t.C:
				if mode == "bar" {
					fmt.Fprintf(w, "\r%s", progressLine(r.Stats(), 30))
				} else {
					fmt.Fprintln(w, progressLine(r.Stats(), 0))
				}
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// replaySources are the live view's sources of a replay run.
func replaySources(r *replay.Runner, scr *runScrape) live.Sources {
	src := live.Sources{
		Counts: func() live.Counts {
			s := r.Stats()
			return live.Counts{Total: s.Total, Sent: s.Sent, Done: s.Done, Failed: s.Errors, InFlight: s.InFlight, Elapsed: s.Elapsed}
		},
		Health: func() live.Health {
			h := r.HealthSoFar()
			if h == nil {
				return live.Health{}
			}
			return live.Health{DispatchLagP50Ns: h.DispatchLagP50Ns, DispatchLagP99Ns: h.DispatchLagP99Ns, DispatchLagMaxNs: h.DispatchLagMaxNs,
				SchedLatP99Ns: h.SchedLatP99Ns, CPUSeconds: h.CPUSeconds, Cores: h.Cores}
		},
	}
	if scr != nil {
		src.Server = scrapeGauges(scr.sc)
	}
	return src
}

// progressLine renders done/total, errors, in flight, rate and ETA, with a
// bar of width cells when width > 0.
func progressLine(s replay.Stats, width int) string {
	var b strings.Builder
	if width > 0 && s.Total > 0 {
		filled := int(min(s.Done, s.Total) * int64(width) / s.Total)
		b.WriteString("[" + strings.Repeat("=", filled) + strings.Repeat(" ", width-filled) + "] ")
	}
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Done) / s.Elapsed.Seconds()
	}
	fmt.Fprintf(&b, "%d/%d done, %d errors, %d in flight, %.1f req/s, %s elapsed", s.Done, s.Total, s.Errors, s.InFlight, rate, s.Elapsed.Truncate(time.Second))
	if rate > 0 && s.Total > s.Done {
		fmt.Fprintf(&b, ", ETA %s", (time.Duration(float64(s.Total-s.Done)/rate) * time.Second).Truncate(time.Second))
	}
	return b.String()
}

// isTerminal reports whether w writes to a character device (a terminal;
// also /dev/null, where a progress bar is harmless). Portable, unlike TCGETS.
func isTerminal(w io.Writer) bool {
	f, ok := redact.Unwrap(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// replayEnums are the flags that name a replay enum value (empty: the
// flag is not offered, the Config default applies).
type replayEnums struct{ policy, endpoint, timing, history string }

// parse sets c's enum fields from the flags; a bad value is bad input
// named by its flag.
func (e replayEnums) parse(c *replay.Config) error {
	var err error
	set := func(v string, parse func(string) error) {
		if err == nil && v != "" {
			if perr := parse(v); perr != nil {
				err = badInput(perr) // names the Config field: exit.go names its flag
			}
		}
	}
	set(e.policy, func(v string) (err error) { c.Policy, err = replay.ParsePolicy(v); return })
	set(e.endpoint, func(v string) (err error) { c.Endpoint, err = replay.ParseEndpoint(v); return })
	set(e.timing, func(v string) (err error) { c.Timing, err = replay.ParseTiming(v); return })
	set(e.history, func(v string) (err error) { c.History, err = replay.ParseHistory(v); return })
	return err
}

// parseHeaders turns K:V flags into a map.
func parseHeaders(hs []string) (map[string]string, error) {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--header: expected K:V, got a value without a colon or a name")
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m, nil
}

// parseShard parses "i/n".
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard %q: expected i/n with 0 <= i < n, e.g. 0/4", s)
	}
	return i, n, nil
}
