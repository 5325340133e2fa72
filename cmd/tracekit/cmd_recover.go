package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/record"
	"github.com/tracekit/tracekit/trace"
)

// newRecoverCmd builds the recover command.
func newRecoverCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "recover FILE|DIR",
		Short: "Turn what a killed run left (its journal) into a valid recording",
		Long: `A run killed by SIGKILL or a crash leaves its records in a journal next to the
recording (recording.parquet.journal), fsync'd every second. recover converts it
into a valid recording and removes the journal. FILE may be the journal or the
recording path; a DIR recovers every *.journal in it (for 'tracekit capture',
each segment's recording and trace).`,
		Example: "  tracekit recover recording.parquet\n  tracekit recover capture-dir/",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := record.RecoverAll(args[0], out)
			for _, r := range res {
				what := "records"
				if r.Trace {
					what = "trace turns"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "recovered %d %s from %s into %s", r.Records, what, r.Journal, r.Out)
				if r.TornBytes > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), " (dropped a %d-byte partial last entry)", r.TornBytes)
				}
				fmt.Fprintln(cmd.OutOrStdout())
			}
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, trace.ErrNotJournal) {
				return badInput(err)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output recording (default: the journal's name without .journal)")
	return cmd
}
