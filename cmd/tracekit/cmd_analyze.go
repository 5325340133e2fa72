package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/sweep"
)

// analyzeFlags are the selection and definition flags shared by analyze
// and compare.
type analyzeFlags struct {
	window        string
	excludeWarmup bool
	goodput       []string
	percentiles   string
	metrics       string
	itl           string
	success       string
	start         string
	maxExact      int
	slices        time.Duration
}

func (f *analyzeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.window, "window", "", "analyze only requests sent in FROM-TO of the run (Go durations, e.g. 60s-300s; TO optional), or in its steady window: steady")
	fs.DurationVar(&f.slices, "slices", 0, "also cut the run into windows this long (e.g. 10s): per window the offered rate, throughput, mean in flight, TTFT and ITL p50/p99")
	fs.BoolVar(&f.excludeWarmup, "exclude-warmup", true, "leave out warm-up requests")
	fs.StringSliceVar(&f.goodput, "goodput", nil, `vLLM goodput SLOs in ms, e.g. "ttft:500 tpot:50 e2el:2000" or ttft:500,tpot:50`)
	fs.StringVar(&f.percentiles, "percentiles", "99", "percentiles to report, comma-separated (vLLM --metric-percentiles)")
	fs.StringVar(&f.metrics, "metrics", "ttft,tpot,itl", "metrics of the vLLM block: ttft,tpot,itl,e2el (vLLM --percentile-metrics)")
	fs.StringVar(&f.itl, "itl", "per-event", "ITL definition of the vLLM block: per-event (vLLM bench serve), per-token (GenAI-Perf), request-mean (AIPerf 0.8) or first-content (guidellm)")
	fs.StringVar(&f.success, "success", "vllm", "which requests count as completed: vllm (HTTP 200, at least one event, no transport error: a stream that ended cleanly without [DONE] counts) or strict (also requires [DONE])")
	fs.StringVar(&f.start, "start", "sent", "start of TTFT and E2EL: sent (sent_ns, the request's bytes written) or slot (slot_ns, before the request is built and sent: vLLM's st)")
	fs.IntVar(&f.maxExact, "max-exact-samples", analyze.DefaultMaxExactSamples, "samples per distribution kept exactly before switching to a histogram (0.1% relative error)")
}

// options turns the flags into analyze.Options; errors are bad input.
func (f *analyzeFlags) options() (analyze.Options, error) {
	o := analyze.Options{IncludeWarmup: !f.excludeWarmup, MaxExactSamples: f.maxExact, Slices: f.slices}
	if f.slices < 0 {
		return o, fmt.Errorf("--slices %v: expected a duration above 0 (or 0 for none): %w", f.slices, analyze.ErrBadInput)
	}
	var err error
	if o.Window, err = analyze.ParseWindow(f.window); err != nil {
		return o, err
	}
	if o.Goodput, err = analyze.ParseGoodput(f.goodput); err != nil {
		return o, err
	}
	if o.Percentiles, err = analyze.ParsePercentiles(f.percentiles); err != nil {
		return o, err
	}
	if o.Metrics, err = analyze.ParseMetrics(f.metrics); err != nil {
		return o, err
	}
	if o.ITL, err = analyze.ParseITLMode(f.itl); err != nil {
		return o, err
	}
	if o.Success, err = analyze.ParseSuccessRule(f.success); err != nil {
		return o, err
	}
	if o.Start, err = analyze.ParseStartMode(f.start); err != nil {
		return o, err
	}
	return o, nil
}

// analyzeErr maps analysis errors about the input to exit code 2.
func analyzeErr(err error) error {
	if errors.Is(err, analyze.ErrBadInput) {
		return badInput(err)
	}
	return err
}

// newAnalyzeCmd builds the analyze command.
func newAnalyzeCmd() *cobra.Command {
	var (
		af                         analyzeFlags
		jsonPath, perReq, htmlPath string
		detailed, quiet, runs      bool
		serverMetrics              string
		confidence                 float64
	)
	cmd := &cobra.Command{
		Use:   "analyze RECORDING.parquet|DIR/... [flags]",
		Short: "Compute serving metrics (vLLM bench serve definitions) from recordings",
		Long: `analyze reads one or more recordings (a glob, or the shards of one distributed
run, aligned on their wall-clock start; a directory stands for every
recording in it, and recordings of different runs are refused) and prints vLLM's "Serving Benchmark
Result" block computed with vLLM's definitions, followed by tracekit's extra
sections: ITL under each definition, latency from the intended send time
(coordinated omission corrected), client health, errors by kind, cached
tokens, a per-turn table and vLLM multi-turn's statistics. A run that mixes
APIs, sends one beyond chat and completions, or reasons adds a section per
endpoint: TTFT, time to first output token (TTFO), TPOT, ITL and reasoning
tokens for the generating APIs; latency, requests, input tokens and items
per second for embeddings, rerank and score.

--runs treats each recording as one run of a repeated benchmark (the -o name
of replay --repeat stands for its OUT-1..OUT-N, and implies --runs) and reports, per metric,
the mean across runs, the sample standard deviation, the coefficient of
variation and the confidence interval of the mean (Student's t with N-1
degrees of freedom, as AIPerf's multi-run report); --json and --html then
hold that aggregate.`,
		Example: `  tracekit analyze run.parquet
  tracekit analyze results/bench-001/
  tracekit analyze 'shards/*.parquet' --window 60s-300s --goodput "ttft:500 tpot:50"
  tracekit analyze run.parquet --percentiles 50,90,99 --metrics ttft,tpot,itl,e2el --json result.json --html report.html
  tracekit analyze run-1.parquet run-2.parquet run-3.parquet --runs --confidence 0.95`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := af.options()
			if err != nil {
				return badInput(err)
			}
			opts.ServerMetrics = serverMetrics
			if runs || namesRunSet(args) {
				return analyzeRunSet(cmd, args, opts, confidence, runSetOutputs{json: jsonPath, html: htmlPath, quiet: quiet, perRequest: perReq})
			}
			paths, skipped, err := analyze.ExpandRuns(args)
			if err != nil {
				return analyzeErr(err)
			}
			for _, s := range skipped {
				fmt.Fprintln(cmd.ErrOrStderr(), "skipped", s)
			}
			s, err := analyze.Files(paths, opts)
			if err != nil {
				return analyzeErr(err)
			}
			if !quiet {
				if err := s.WriteText(cmd.OutOrStdout()); err != nil {
					return err
				}
			}
			if jsonPath != "" {
				if err := writeFile(jsonPath, func(f io.Writer) error { return s.WriteJSON(f, detailed) }); err != nil {
					return err
				}
			}
			if perReq != "" {
				if err := s.WritePerRequest(perReq); err != nil {
					if errors.Is(err, analyze.ErrBadInput) { // the file name: say which flag gave it
						err = fmt.Errorf("--per-request %w", err)
					}
					return analyzeErr(err)
				}
			}
			if htmlPath != "" {
				if err := writeFile(htmlPath, func(f io.Writer) error { return s.WriteHTML(f) }); err != nil {
					return err
				}
			}
			return nil
		},
	}
	af.register(cmd.Flags())
	cmd.Flags().StringVar(&jsonPath, "json", "", "write vLLM's --save-result JSON (plus tracekit's figures under \"tracekit\") to FILE")
	cmd.Flags().BoolVar(&detailed, "json-detailed", false, "add vLLM's --save-detailed per-request lists to the JSON")
	cmd.Flags().StringVar(&perReq, "per-request", "", "write one row per request to FILE.parquet or FILE.csv")
	cmd.Flags().StringVar(&htmlPath, "html", "", "write a self-contained HTML report with charts to FILE")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not print the text report")
	cmd.Flags().BoolVar(&runs, "runs", false, "each recording is one run of a repeated benchmark: report each metric's mean, std and confidence interval across them")
	cmd.Flags().Float64Var(&confidence, "confidence", analyze.DefaultConfidence, "with --runs: confidence level of the intervals")
	cmd.Flags().StringVar(&serverMetrics, "server-metrics", "", "report this telemetry sidecar in the server section (default: RUN.metrics.parquet beside the recording, if any)")
	return cmd
}

// writeFile writes path with write through a temporary file renamed into
// place (sweep.WriteFileAtomic): a report cut short by an error or a
// signal never stands as a whole one, and the previous file stays.
func writeFile(path string, write func(io.Writer) error) error {
	return sweep.WriteFileAtomic(path, write)
}
