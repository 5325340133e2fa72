package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/sweep"
)

// isSweepDir reports whether path is a directory holding a sweep summary.
func isSweepDir(path string) bool {
	_, err := os.Stat(filepath.Join(path, sweep.SummaryJSON))
	return err == nil
}

// newCompareCmd builds the compare command.
func newCompareCmd() *cobra.Command {
	var af analyzeFlags
	var failOn []string
	var verdictPath string
	var confidence float64
	var beyondCI bool
	var htmlPath string
	cmd := &cobra.Command{
		Use:   "compare A.parquet B.parquet [flags]",
		Short: "Show two recordings' serving metrics side by side with the change of each",
		Long: `compare analyzes two runs with the same definitions and selection (the flags
of analyze) and prints each metric of A and B, B - A and the relative change,
marking which way is better.  A and B may each be a glob of shards. Two sweep
directories (each with a sweep.json) are compared as 'tracekit sweep compare'
does: their SLO answers, knees and step tables.

--fail-on makes it a CI gate on two recordings: each condition is
METRIC>CHANGE or METRIC<CHANGE, CHANGE relative to A with a % sign
((B - A) / |A|), else absolute (B - A). compare prints a line per condition
and exits 1 when any is met (a regression), 2 when one is malformed. It is
a threshold on one run against one run, not a test of significance.

Either side may be a run set: the -o name given to replay --repeat, which
stands for its OUT-1..OUT-N (a single recording is a set of one). compare
then prints each metric's mean across runs ± the half width of its
--confidence interval, and the gate compares the means. With --beyond-ci a
condition fails only when the change also clears the noise: for > the lower
end of B's interval is above the upper end of A's, for < the upper end of
B's is below the lower end of A's. --html writes the comparison of run sets
as a page: each side's run-to-run variance (unknown for a single run), the
means with their intervals and coefficients of variation, and per latency a
chart of each run's median and P99.`,
		Example: `  tracekit compare baseline.parquet candidate.parquet --percentiles 50,99
  tracekit compare base.parquet new.parquet --fail-on 'ttft.p99>+10%,itl.median>+5%,output_throughput<-5%'
  tracekit compare sweep-before/ sweep-after/
  tracekit compare base.parquet new.parquet --fail-on 'ttft.p99>+10%' --beyond-ci   # sets from replay --repeat`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			gate, err := analyze.ParseGate(failOn)
			if err != nil {
				return badInput(err)
			}
			if verdictPath != "" && len(gate) == 0 {
				return badInput(fmt.Errorf("--verdict %s: it records --fail-on's conditions, and none was given", verdictPath))
			}
			if isSweepDir(args[0]) && isSweepDir(args[1]) {
				if len(gate) > 0 {
					return badInput(fmt.Errorf("--fail-on compares two recordings, not sweep directories (%s, %s)", args[0], args[1]))
				}
				var s [2]*sweep.Summary
				for i, dir := range args {
					var err error
					if s[i], err = sweep.ReadSummary(dir); err != nil {
						return badInput(err)
					}
				}
				return sweep.WriteCompare(cmd.OutOrStdout(), s[0], s[1], args[0], args[1])
			}
			opts, err := af.options()
			if err != nil {
				return badInput(err)
			}
			if sets := [2][]string{analyze.FindRunSet(args[0]), analyze.FindRunSet(args[1])}; len(sets[0]) > 0 || len(sets[1]) > 0 {
				return compareRunSets(cmd, args, sets, opts, gate, runsGate{confidence: confidence, beyondCI: beyondCI, verdict: verdictPath, html: htmlPath})
			}
			if htmlPath != "" {
				return badInput(fmt.Errorf("--html writes the comparison of run sets (the -o name of replay --num-runs); %s and %s are single runs: analyze --html reports each", args[0], args[1]))
			}
			if beyondCI {
				return badInput(fmt.Errorf("--beyond-ci needs a run set on one side at least (the -o name of replay --repeat); %s and %s are single runs", args[0], args[1]))
			}
			var runs [2]*analyze.Summary
			for i, arg := range args {
				paths, err := analyze.Expand([]string{arg})
				if err != nil {
					return analyzeErr(err)
				}
				if runs[i], err = analyze.Files(paths, opts); err != nil {
					return analyzeErr(err)
				}
			}
			if err := analyze.WriteCompare(cmd.OutOrStdout(), runs[0], runs[1], args[0], args[1]); err != nil || len(gate) == 0 {
				return err
			}
			results, err := analyze.EvaluateGate(gate, runs[0], runs[1])
			if err != nil {
				return badInput(err)
			}
			return finishGate(cmd, results, args, verdictPath)
		},
	}
	af.register(cmd.Flags())
	cmd.Flags().StringArrayVar(&failOn, "fail-on", nil, "exit 1 when a condition holds, e.g. 'ttft.p99>+10%,output_throughput<-5%' (repeatable; see docs/commands/compare.md)")
	cmd.Flags().Float64Var(&confidence, "confidence", analyze.DefaultConfidence, "with run sets: confidence level of the intervals")
	cmd.Flags().BoolVar(&beyondCI, "beyond-ci", false, "with run sets: a condition fails only when the change also clears both confidence intervals")
	cmd.Flags().StringVar(&htmlPath, "html", "", "with run sets: also write the comparison as a self-contained HTML page to FILE")
	cmd.Flags().StringVar(&verdictPath, "verdict", "", "with --fail-on, also write the verdict as JSON to FILE (passed, and each condition's A, B and change)")
	return cmd
}

// finishGate prints the gate's results, writes the verdict when asked and
// fails (exit 1) naming the conditions that held.
func finishGate(cmd *cobra.Command, results []analyze.GateResult, args []string, verdictPath string) error {
	if err := analyze.WriteGate(cmd.OutOrStdout(), results); err != nil {
		return err
	}
	if verdictPath != "" {
		v := analyze.Verdict(results, args[0], args[1])
		if err := writeFile(verdictPath, func(f io.Writer) error {
			enc := json.NewEncoder(f)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}); err != nil {
			return err
		}
	}
	var failed []string
	for _, r := range results {
		if r.Failed {
			failed = append(failed, r.Text)
		}
	}
	if len(failed) > 0 {
		return runFailed(fmt.Errorf("regression: %s (B %s against A %s)", strings.Join(failed, ", "), args[1], args[0]))
	}
	return nil
}
