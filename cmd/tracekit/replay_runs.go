package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/replay"
)

// runReplays runs the trace o.numRuns times, each run a whole replay
// (runReplay) into its own recording OUT-i, then prints the aggregate
// across runs. Every output is checked before the first run, so a set
// never stops at run k on an existing file. A failed or interrupted run
// ends the set with its exit code; the runs before it are complete.
func runReplays(cmd *cobra.Command, c replay.Config, o replayOpts) error {
	if o.numRuns < 1 {
		return badInput(fmt.Errorf("--repeat %d: expected 1 or more", o.numRuns))
	}
	if o.runCooldown < 0 {
		return badInput(fmt.Errorf("--run-cooldown %s: expected a duration of 0 or more", o.runCooldown))
	}
	if o.numRuns == 1 {
		return runReplay(cmd, c, o)
	}
	if err := checkConfidence(o.confidence); err != nil {
		return err
	}
	paths := make([]string, o.numRuns)
	for i := range paths {
		paths[i] = analyze.RunPath(o.out, i+1)
		if _, err := os.Stat(paths[i]); err == nil && !o.force {
			return badInput(fmt.Errorf("%s exists (run %d of --repeat %d): pass --force to replace it", paths[i], i+1, o.numRuns))
		}
	}
	stderr := cmd.ErrOrStderr()
	for i, p := range paths {
		if i > 0 && o.runCooldown > 0 {
			if err := cooldown(o.runCooldown); err != nil {
				return interrupted(fmt.Errorf("%w during the cooldown before run %d; runs 1-%d are complete", err, i+1, i))
			}
		}
		fmt.Fprintf(stderr, "run %d of %d: %s\n", i+1, o.numRuns, p)
		one := o
		one.out, one.noAnalyze = p, true
		if err := runReplay(cmd, c, one); err != nil {
			return fmt.Errorf("run %d of %d: %w", i+1, o.numRuns, err)
		}
	}
	if o.noAnalyze {
		return nil
	}
	rs, err := aggregateRuns(paths, analyze.Options{}, o.confidence)
	if err != nil {
		fmt.Fprintf(stderr, "analyze: %v\n", err)
		return nil // the recordings are complete; analyze --runs can retry
	}
	return rs.WriteText(cmd.OutOrStdout())
}

// repeatAlias makes --num-runs (the name vLLM's Rust benchmark client
// gives it) the same flag as --repeat.
func repeatAlias(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if name == "num-runs" {
		name = "repeat"
	}
	return pflag.NormalizedName(name)
}

// cooldown waits d; SIGINT or SIGTERM ends it early with an error.
func cooldown(d time.Duration) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	select {
	case s := <-sigs:
		return fmt.Errorf("%v received", s)
	case <-ctx.Done():
		return nil
	}
}
