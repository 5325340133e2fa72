package main

import (
	"os"
	"testing"
)

// cliChildEnv set to 1 makes the test binary run as the tracekit command:
// tests start tracekit processes by re-executing themselves (os.Args[1:] is
// the command line), never by building the binary.
const cliChildEnv = "TRACEKIT_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
