package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// TestCloseReleasesConnections: after Run and Close, none of the run's
// keep-alive connections is left open in this process. A pool would keep
// idle ones until a later request found them stale, so back-to-back runs in one
// process (calibrate's ladder) used to run out of file descriptors.
func TestCloseReleasesConnections(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var convs [][]trace.Turn
	for i := range 40 {
		convs = append(convs, conv(fmt.Sprintf("c%d", i), 1, 10*time.Millisecond, 0, 3))
	}
	path := writeTrace(t, convs...)
	before := openSockets(t)
	r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	res, err := r.Run(t.Context(), sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 40 || res.Errors != 0 {
		t.Fatalf("result %+v, want 40 sent without errors", res)
	}
	if during := openSockets(t) - before; during < 20 {
		// The mock's server side counts too: 40 concurrent streams must
		// have left at least 20 idle client sockets, or the test proves nothing.
		t.Fatalf("only %d sockets open after the run: the test did not exercise keep-alive", during)
	}
	r.Close()
	srv.Close() // the server side is gone too: nothing else holds a socket
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := openSockets(t) - before
		if left <= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets still open 5 s after Runner.Close and the server's Close (40 streams were run): idle connections are not closed", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openSockets counts this process's open sockets.
func openSockets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count sockets: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
