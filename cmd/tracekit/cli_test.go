package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runCLI runs one tracekit command line in this process, as main would,
// and returns its stdout, stderr and exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
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
