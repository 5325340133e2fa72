package main

import (
	"os"
	"testing"

	"github.com/tracekit/tracekit/internal/stamp"
)

// asMainEnv makes this test binary run as tracekit itself. Tests that need
// a real process (signals, exit codes, a file-descriptor limit, a mock to
// stop) exec the test binary, which TestMain turns into main: nothing is
// compiled, and the child runs exactly what main runs.
const asMainEnv = "TRACEKIT_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	stamp.ObserverMain() // as main does
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// Every child of this process runs as tracekit: the tests' own, and
	// those tracekit starts itself (calibrate's `tracekit mock`).
	os.Setenv(asMainEnv, "1")
	os.Exit(m.Run())
}

// tracekitBinary returns the program tests run as `tracekit`: this test
// binary, which runs as main in a child (TestMain).
func tracekitBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("finding the test binary: %v", err)
	}
	return exe
}
