package stamp

import (
	"os"
	"testing"
)

// forgetEnv makes TestMain leave ObserverMain out, as a program that
// forgot it would: the observer fallback tests start this binary so.
const forgetEnv = "TRACEKIT_STAMP_TEST_FORGET"

func TestMain(m *testing.M) {
	if os.Getenv(forgetEnv) == "" {
		ObserverMain()
	}
	os.Exit(m.Run())
}
