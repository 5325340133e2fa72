package main

import (
	"strings"
	"testing"
)

// An empty --streams is the empty list (no stream steps), not a malformed count:
// alone it leaves calibrate without a step, said as such; a word is
// refused naming the flag.
func TestCalibrateStreamsEmptyList(t *testing.T) {
	if _, stderr, code := runCLI(t, "calibrate", "--streams", "", "--mock", "inprocess"); code != ExitUsage || !strings.Contains(stderr, "no step: give --streams") {
		t.Errorf("--streams '': exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "calibrate", "--streams", "10,many", "--mock", "inprocess"); code != ExitUsage ||
		!strings.Contains(stderr, "--streams") || !strings.Contains(stderr, `"many" is not a whole number`) {
		t.Errorf("--streams 10,many: exit %d: %s", code, stderr)
	}
}
