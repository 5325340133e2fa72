package main

import (
	"os"
	"path/filepath"

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
	cmd := &cobra.Command{
		Use:   "compare A.parquet B.parquet [flags]",
		Short: "Show two recordings' serving metrics side by side with the change of each",
		Long: `compare analyzes two runs with the same definitions and selection (the flags
of analyze) and prints each metric of A and B, B - A and the relative change,
marking which way is better.  A and B may each be a glob of shards. Two sweep
directories (each with a sweep.json) are compared as 'tracekit sweep compare'
does: their SLO answers, knees and step tables.`,
		Example: `  tracekit compare baseline.parquet candidate.parquet --percentiles 50,99
  tracekit compare sweep-before/ sweep-after/`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if isSweepDir(args[0]) && isSweepDir(args[1]) {
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
			return analyze.WriteCompare(cmd.OutOrStdout(), runs[0], runs[1], args[0], args[1])
		},
	}
	af.register(cmd.Flags())
	return cmd
}
