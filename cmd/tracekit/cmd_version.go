package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"github.com/tracekit/tracekit/trace"
)

// newVersionCmd builds the version command.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print tracekit's version",
		Example: "  tracekit version",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "tracekit %s (%s, %s/%s)\n", trace.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
