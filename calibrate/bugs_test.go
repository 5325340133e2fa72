package calibrate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/capture"
	"github.com/tracekit/tracekit/mock"
	"github.com/tracekit/tracekit/replay"
	"github.com/tracekit/tracekit/trace"
)

// TestReplayCloseReleasesConnections shows a bug in replay (not this
// package): Runner.Close leaves the fasthttp HostClient's idle keep-alive
// connections open until its MaxIdleConnDuration (60 s) passes, so a
// process that runs one replay after another (calibrate's ladder) still
// holds every socket of the previous run. After a 10,000-stream step the
// next 10,800-stream step found 10,000 of its 20,000 descriptors taken and
// failed 7,293 dials. Fix: Runner.Close should call the targets'
// HostClient.CloseIdleConnections. calibrate works around it by waiting
// for the descriptors (waitForFDs). Skipped unless TRACEKIT_KNOWN_BUGS=1
// so the suite stays green until replay is fixed.
func TestReplayCloseReleasesConnections(t *testing.T) {
	if os.Getenv("TRACEKIT_KNOWN_BUGS") == "" {
		t.Skip("known replay bug, see the comment; run with TRACEKIT_KNOWN_BUGS=1")
	}
	dir := t.TempDir()
	p := size(Step{Kind: KindStreams, Streams: 40, EventsPerS: 400}, 300*time.Millisecond, 10*time.Millisecond, 0)
	tracePath := filepath.Join(dir, "t.parquet")
	if err := p.writeTrace(tracePath); err != nil {
		t.Fatal(err)
	}
	srv, err := mock.Start(p.mockConfig())
	if err != nil {
		t.Fatal(err)
	}
	before := openSockets()
	r, err := replay.New(replay.Config{Trace: tracePath, Targets: []string{srv.URL()}, Model: "tracekit-mock", IgnoreEOS: true, ContinuousUsage: "on"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := capture.NewRecorder(filepath.Join(dir, "r.parquet"), trace.RunMeta{}, capture.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Run(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	r.Close()
	srv.Close() // the server side is gone too: nothing should keep the sockets
	time.Sleep(200 * time.Millisecond)
	if left := openSockets() - before; left > 0 {
		t.Errorf("%d sockets still open after Runner.Close and the server's Close (40 streams were run): idle connections are not closed", left)
	}
}

// openSockets counts this process's open sockets.
func openSockets() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
