// Command tracekit records and replays LLM serving traffic: synth writes a
// trace, replay sends it and writes a recording, analyze computes metrics.
// Each subcommand lives in its own cmd_<name>.go file as a constructor
// (newReplayCmd, ...) over the packages that hold the logic; run executes
// one command line in process and returns its exit code, so tests call it
// directly (exit.go documents the codes).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/internal/stamp"
)

// newRoot builds the top-level command with every subcommand.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "tracekit",
		Short: "Record and replay traffic to benchmark LLM inference servers",
		Long: `tracekit replays realistic multi-turn traffic against OpenAI-compatible LLM
servers (vLLM, SGLang, TGI, Ollama) with exact timing, records the raw
timestamp of every streamed token event, and computes serving metrics offline.

  tracekit synth    write a trace (synthetic, ShareGPT or imported production traces)
  tracekit replay   send a trace to a server and write a recording
  tracekit analyze  compute TTFT, ITL, TPOT, throughput from a recording
  tracekit mock     run an OpenAI-compatible mock server with a latency model

Exit codes: 0 success, 1 the run failed, 2 bad usage or input, 3 the client
could not measure faithfully (its own health check failed where that decided
the result), 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newSynthCmd(), newInspectCmd(), newMockCmd(), newReplayCmd(), newAnalyzeCmd(),
		newCompareCmd(), newCaptureCmd(), newRecoverCmd(), newCalibrateCmd(), newSweepCmd(), newVersionCmd())
	// An unknown flag or a bad flag value is bad usage (exit 2).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	for _, c := range root.Commands() {
		if c.Args != nil {
			c.Args = usageArgs(c.Args)
		}
	}
	strictCompletion(root)
	return root
}

// strictCompletion makes `tracekit completion SHELL` with a shell cobra
// has no script for bad usage (exit 2): cobra's own completion command has
// no Run, so it would print its help and exit 0.
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, s := range c.Commands() {
			shells = append(shells, s.Name())
		}
		c.Args = func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return badInput(fmt.Errorf("completion %q: unknown shell, expected %s", args[0], orList(shells)))
			}
			return nil
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// orList joins "a, b, c or d".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// usageArgs makes an argument-count error bad usage (exit 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error { return badInput(check(cmd, args)) }
}

// run executes one command line (without the program name) and returns the
// exit code; errors are printed to stderr, prefixed "tracekit:", in the
// command's terms (errorText). Whatever the command prints goes through the
// run's redact.Scrubber, to which the command adds the credentials it knows
// (redact.FromContext).
func run(args []string, stdout, stderr io.Writer) int {
	sc := redact.New()
	stdout, stderr = sc.Writer(stdout), sc.Writer(stderr)
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(redact.NewContext(context.Background(), sc))
	if err == nil {
		return ExitOK
	}
	if msg := errorText(cmd, err); msg != "" {
		fmt.Fprintln(stderr, "tracekit:", msg)
	}
	return exitCode(err)
}

func main() {
	// Before anything else: a kernel-offset replay's arrival observer is
	// this executable started again, and becomes it here.
	stamp.ObserverMain()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
