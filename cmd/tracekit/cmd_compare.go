package main

import (
	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/analyze"
)

// newCompareCmd builds the compare command.
func newCompareCmd() *cobra.Command {
	var af analyzeFlags
	cmd := &cobra.Command{
		Use:   "compare A.parquet B.parquet [flags]",
		Short: "Show two recordings' serving metrics side by side with the change of each",
		Long: `compare analyzes two runs with the same definitions and selection (the flags
of analyze) and prints each metric of A and B, B - A and the relative change,
marking which way is better.  A and B may each be a glob of shards.`,
		Example: `  tracekit compare baseline.parquet candidate.parquet --percentiles 50,99`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
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
