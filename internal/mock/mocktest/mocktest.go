package mocktest

import (
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
)

// Fast is the test model: mock.DefaultConfig with a 2 ms prefill and 1 ms
// per token, no per-token prefill, batch or jitter cost, so a test's
// streams are short and their times predictable; the log and the request
// bodies are kept for the test to read (Server.Log). A test that needs
// other latencies, lengths or faults changes what it needs (Start's edit).
func Fast() mock.Config {
	cfg := mock.DefaultConfig()
	cfg.Latency.PrefillBase = mock.Duration(2 * time.Millisecond)
	cfg.Latency.PrefillPerToken = 0
	cfg.Latency.DecodeBase = mock.Duration(time.Millisecond)
	cfg.Latency.DecodePerSeq = 0
	cfg.Latency.JitterCV = 0
	cfg.KeepLog, cfg.KeepBodies = true, true
	return cfg
}

// Start starts the Fast mock, changed by edit when it is not nil, for the
// test t (see StartConfig).
func Start(t testing.TB, edit func(*mock.Config)) *mock.Server {
	t.Helper()
	cfg := Fast()
	if edit != nil {
		edit(&cfg)
	}
	return StartConfig(t, cfg)
}

// StartConfig starts a mock with cfg for the test t and closes it when t
// ends (a failing Close fails t). A test may Close it earlier itself.
func StartConfig(t testing.TB, cfg mock.Config) *mock.Server {
	t.Helper()
	srv, err := mock.Start(cfg)
	if err != nil {
		t.Fatalf("starting the mock: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the mock: %v", err)
		}
	})
	return srv
}
