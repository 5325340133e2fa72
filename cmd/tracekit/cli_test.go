package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/calibrate"
	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/synth"
)

// analyzeJSON runs tracekit analyze on rec with --json into a file of the
// test's and decodes that file into out (the parts a test reads).
func analyzeJSON(t *testing.T, rec string, out any) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "analysis.json")
	if _, stderr, code := runCLI(t, "analyze", rec, "--json", js); code != ExitOK {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
}

// runCLI runs one tracekit command line in this process, as main would,
// and returns its stdout, stderr and exit code. Every JSON result the
// command wrote is checked against the result schema (checkResults).
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	outputs := resultOutputs(args)
	before := statAll(outputs)
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	checkResults(t, outputs, before)
	return out.String(), errb.String(), code
}

// Usage mistakes exit 2 with a message naming what was wrong, for every
// command.
func TestUsageErrorsExit2(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"synth", "--no-such-flag"}, "--no-such-flag"},
		{[]string{"replay", "--bogus", "x.parquet"}, "--bogus"},
		{[]string{"analyze"}, "arg"},
		{[]string{"inspect", "a", "b"}, "arg"},
		{[]string{"no-such-command"}, "unknown command"},
		{[]string{"mock", "--max-num-seqs", "many"}, "--max-num-seqs"},
		{[]string{"mock", "--spec-k", "2", "--tokens-per-event", "3"}, "spec_k 2 and tokens_per_event 3"},
		{[]string{"mock", "--spec-k", "2", "--spec-accept", "2"}, "spec_accept 2 must be between 0 and 1"},
		{[]string{"replay", "x.parquet", "--target", "http://127.0.0.1:1", "--timing", "often"}, `--timing "often": expected one of closed, trace`},
		{[]string{"replay", "x.parquet", "--target", "http://127.0.0.1:1", "--target-policy", "random"}, `--target-policy "random": expected one of round-robin, conversation`},
		{[]string{"sweep", "x.parquet", "--target", "http://127.0.0.1:1", "--out", "d", "--history", "mine"}, `--history "mine": expected one of actual, reference`},
		{[]string{"replay", "x.parquet"}, `required flag(s) "target" not set`},
		{[]string{"sweep", "x.parquet", "--out", "d", "--speed", "1"}, `required flag(s) "target" not set`},
		{[]string{"completion", "tcsh"}, `completion "tcsh": unknown shell, expected bash, fish, powershell or zsh`},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", c.args, code, stderr, ExitUsage, c.want)
		}
	}
}

func TestVersionExits0(t *testing.T) {
	out, _, code := runCLI(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "tracekit ") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
}

// Libraries name their options fields; the command line names the flags
// that set them: the same mistake made through the Go API and on the
// command line, each message in its own terms (exit.go's errorText, the
// fieldFlags table).
func TestLibraryFieldsCommandFlags(t *testing.T) {
	_, replayErr := replay.New(replay.Config{Trace: "t.parquet", Targets: []string{"http://127.0.0.1:1"}, RequestTimeout: -time.Second}, nil)
	_, itlErr := analyze.ParseITLMode("mean")
	for _, c := range []struct {
		libErr  error
		lib     string // in the library's message
		args    []string
		cli     string // in the command's
		goNames []string
	}{
		{replayErr, "RequestTimeout -1s: expected 0 (the default) or a positive duration",
			[]string{"replay", "x.parquet", "--target", "http://127.0.0.1:1", "--request-timeout", "-1s"},
			"--request-timeout -1s: expected 0 (the default) or a positive duration", []string{"RequestTimeout"}},
		{calibrate.Validate(calibrate.Config{Target: "http://127.0.0.1:1"}), "Target needs MockLog: the ground-truth log",
			[]string{"calibrate", "--target", "http://127.0.0.1:1"}, "--target needs --mock-log: the ground-truth log", []string{"Target", "MockLog"}},
		{calibrate.Validate(calibrate.Config{Stamps: []string{"sundial"}, Mode: calibrate.ModeInProcess}), `Stamps value "sundial" (#1): StampMode "sundial": expected one of`,
			[]string{"calibrate", "--mock", "inprocess", "--stamp", "sundial"}, `--stamp value "sundial" (#1): --stamp "sundial": expected one of`, []string{"Stamps", "StampMode"}},
		{itlErr, `ITL "mean": expected per-event`, []string{"analyze", "x.parquet", "--itl", "mean"}, `--itl "mean": expected per-event`, []string{"ITL"}},
		// a message about its field alone: the library puts the field
		// first, the command the flag and its value
		{synth.Schedule{Rate: -1}.Validate(), "Rate: rate -1 must be >= 0", []string{"synth", "--rate", "-1", "-o", filepath.Join(t.TempDir(), "t.parquet")},
			"--rate -1: rate -1 must be >= 0", []string{"Rate:"}},
	} {
		// (calibrate's advice names the flag of the mock it runs, not its own)
		var fe *fielderr.Error
		if c.libErr == nil || !errors.As(c.libErr, &fe) || !strings.Contains(c.libErr.Error(), c.lib) ||
			strings.Contains(strings.ReplaceAll(c.libErr.Error(), "--emit-log", ""), "--") {
			t.Errorf("library: %v, want a field error saying %q and no flag", c.libErr, c.lib)
		}
		_, stderr, code := runCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.cli) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", c.args, code, stderr, ExitUsage, c.cli)
		}
		for _, n := range c.goNames {
			if strings.Contains(stderr, n) {
				t.Errorf("%v: stderr %q names the Go field %s", c.args, stderr, n)
			}
		}
	}
}

// A target URL whose port cannot exist is bad input (exit 2), named,
// before anything is sent or written.
func TestBadTargetPortExit2(t *testing.T) {
	tr := sweepTrace(t, 5, 10)
	dir := t.TempDir()
	for _, target := range []string{"http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:http"} {
		for _, args := range [][]string{
			{"replay", tr, "--target", target, "--progress", "none", "-o", filepath.Join(dir, "r.parquet")},
			{"sweep", tr, "--target", target, "--out", filepath.Join(dir, "s"), "--speed", "1"},
		} {
			_, stderr, code := runCLI(t, args...)
			if code != ExitUsage || !strings.Contains(stderr, "--target "+strconv.Quote(target)) || !strings.Contains(stderr, "port") {
				t.Errorf("%s --target %s: exit %d, stderr %q; want exit 2 naming the target's port", args[0], target, code, stderr)
			}
		}
	}
	if names := listDir(t, dir); len(names) != 0 {
		t.Errorf("files left: %v", names)
	}
}
