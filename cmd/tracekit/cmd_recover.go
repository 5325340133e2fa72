package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/internal/record"
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
each segment's recording and trace). recover never replaces a file: when the
output name is taken it writes NAME.recovered.parquet (then .recovered-2, ...).
Each file rescued is reported on stderr with its count of records.

A journal whose run is still going (its process holds the lock FILE.lock)
is left alone and named with that process's pid.

Exit codes: 0 recovered, 2 FILE missing, not a tracekit journal or still
being written by a live run, 1 recovery
failed midway (a corrupt entry inside the journal, or the output could not be
written; the journal is kept).`,
		Example: "  tracekit recover recording.parquet\n  tracekit recover capture-dir/",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(args[0]); err != nil {
				if _, jerr := os.Stat(record.JournalPath(args[0])); jerr != nil {
					return badInput(fmt.Errorf("recover %s: %w", args[0], err))
				}
			}
			res, err := record.RecoverAll(args[0], out)
			stderr := cmd.ErrOrStderr()
			for _, r := range res {
				what := "records"
				if r.Trace {
					what = "trace turns"
				}
				fmt.Fprintf(stderr, "recovered %d %s from %s into %s", r.Records, what, r.Journal, r.Out)
				if r.MediaItems > 0 {
					fmt.Fprintf(stderr, " with %d media items (%s) in %s", r.MediaItems, byteSize(r.MediaBytes), trace.MediaPath(r.Out))
				}
				if r.TornBytes > 0 {
					fmt.Fprintf(stderr, " (dropped a %d-byte partial last entry)", r.TornBytes)
				}
				fmt.Fprintln(stderr)
			}
			var live *record.LockedError
			if errors.Is(err, trace.ErrNotJournal) || errors.As(err, &live) {
				return badInput(err)
			}
			return runFailed(err)
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "output recording (default: the journal's name without .journal)")
	return cmd
}
