// Command tracekit records and replays LLM serving traffic: synth writes a
// trace, replay sends it and writes a recording, analyze computes metrics.
// Each subcommand lives in its own cmd_<name>.go file and registers itself
// on root from an init function; the logic lives in the packages.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// root is the top-level command; package-level so each cmd_*.go file can
// add its subcommand in init.
var root = &cobra.Command{
	Use:   "tracekit",
	Short: "Record and replay traffic to benchmark LLM inference servers",
	Long: `tracekit replays realistic multi-turn traffic against OpenAI-compatible LLM
servers (vLLM, SGLang, TGI, Ollama) with exact timing, records the raw
timestamp of every streamed token event, and computes serving metrics offline.

  tracekit synth    write a trace (synthetic, ShareGPT or imported production traces)
  tracekit replay   send a trace to a server and write a recording
  tracekit analyze  compute TTFT, ITL, TPOT, throughput from a recording
  tracekit mock     run an OpenAI-compatible mock server with a latency model`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

// usageError marks errors caused by bad input, which exit with code 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// badInput wraps err so that main exits with code 2.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

func main() {
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tracekit:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
