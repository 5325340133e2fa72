package replay

import (
	"os"
	"testing"

	"github.com/tracekit/tracekit/internal/stamp"
)

// TestMain: this test binary is also the arrival observer of its
// kernel-offset runs and the stream benchmarks' mock (benchMockEnv), each
// a child process of it.
func TestMain(m *testing.M) {
	stamp.ObserverMain()
	if spec := os.Getenv(benchMockEnv); spec != "" {
		serveBenchMock(spec)
		return
	}
	os.Exit(m.Run())
}
