package analyze

import (
	"os"
	"testing"

	"github.com/tracekit/tracekit/internal/stamp"
)

// TestMain: this test binary is also the arrival observer of the
// kernel-offset replays its tests run (a child process of it).
func TestMain(m *testing.M) {
	stamp.ObserverMain()
	os.Exit(m.Run())
}
