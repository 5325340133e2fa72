package mock

import "testing"

// StartT starts a mock with cfg for the test t and closes it when t ends
// (a failing Close fails t): the one way tests of every package get a real
// mock server on loopback. A test may Close it earlier itself.
func StartT(t testing.TB, cfg Config) *Server {
	t.Helper()
	srv, err := Start(cfg)
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
