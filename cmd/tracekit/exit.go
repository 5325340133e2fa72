package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tracekit/tracekit/internal/fielderr"
)

// Exit codes, the same for every command (README: "Exit codes").
const (
	ExitOK          = 0   // the command did what it was asked
	ExitFailed      = 1   // the run failed: target unreachable, no request succeeded, too many errors
	ExitUsage       = 2   // bad usage or input: unknown flag, wrong arguments, bad file, value out of range
	ExitUnmeasured  = 3   // the client could not measure faithfully: its own health check failed where that decided the result (sweep)
	ExitInterrupted = 130 // stopped by SIGINT (128 + 2); outputs are still complete and valid
)

// exitError is the one error type that carries an exit code. Errors without
// one exit with ExitFailed.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e exitError) Unwrap() error { return e.err }

// badInput marks err as bad usage or input (exit 2); nil stays nil.
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return exitError{ExitUsage, err}
}

// runFailed marks err as a failed run (exit 1); nil stays nil.
func runFailed(err error) error {
	if err == nil {
		return nil
	}
	return exitError{ExitFailed, err}
}

// unmeasured marks err as a result the client could not measure
// faithfully (exit 3).
func unmeasured(err error) error { return exitError{ExitUnmeasured, err} }

// interrupted is returned by a command stopped by SIGINT once its outputs
// are complete (exit 130); err may add what was kept, or be nil.
func interrupted(err error) error { return exitError{ExitInterrupted, err} }

// exitCode maps an error returned by a command to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e exitError
	if errors.As(err, &e) {
		return e.code
	}
	// cobra's own usage errors carry no type.
	if msg := err.Error(); strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.HasPrefix(msg, "required flag(s)") {
		return ExitUsage
	}
	return ExitFailed
}

// errorText is err's message for the user of cmd: each library options
// field a *fielderr.Error names is written as the flag of cmd that sets it
// (fieldFlags). A message about its field alone (no field named in it) is
// written after the flag and the value it was given, as the user typed it.
func errorText(cmd *cobra.Command, err error) string {
	msg := err.Error()
	if cmd == nil {
		return msg
	}
	flags := fieldFlags[strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")]
	flagOf := func(st, field string) (string, bool) {
		name, ok := flags[st+"."+field]
		if !ok || cmd.Flags().Lookup(name) == nil {
			return "", false
		}
		return name, true
	}
	// Outermost first: an outer message holds an inner one's text, which is
	// then rewritten in turn.
	for _, fe := range fielderr.All(err) {
		text := fe.Text(func(field string) string {
			if name, ok := flagOf(fe.Struct, field); ok {
				return "--" + name
			}
			return field
		})
		if !fe.NamesFields() {
			name, ok := flagOf(fe.Struct, fe.Field)
			if !ok {
				continue // Error's own "Field: ..." stands
			}
			text = "--" + name + " " + cmd.Flags().Lookup(name).Value.String() + ": " + text
		}
		msg = strings.Replace(msg, fe.Error(), text, 1)
	}
	return msg
}
