package capture

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	rtrace "runtime/trace"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/stamp"
	"github.com/tracekit/tracekit/trace"
)

// TestMain lets the SIGKILL test re-exec this binary as a proxy child,
// and the round trips' replays as their arrival observer.
func TestMain(m *testing.M) {
	stamp.ObserverMain()
	if dir := os.Getenv("TRACEKIT_PROXY_CHILD"); dir != "" {
		proxyChild(dir, os.Getenv("TRACEKIT_PROXY_UPSTREAM"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// proxyChild runs a capture proxy, prints its URL and serves until killed,
// or until SIGINT or SIGTERM: then it closes the proxy (completing its
// files) and exits 0, or 1 saying why not. TRACEKIT_PROXY_BENCH=1 keeps
// the default journal sync period (tests shorten it);
// TRACEKIT_PROXY_SLOW_FSYNC=1 makes each fsync of a trace journal take a
// minute;
// TRACEKIT_PROXY_CPUPROFILE names a CPU profile to write;
// TRACEKIT_PROXY_GOMAXPROCS sets the child's GOMAXPROCS;
// TRACEKIT_PROXY_TRACE names a runtime execution trace to write (go tool
// trace: where the loop's goroutine waited to run).
func proxyChild(dir, upstream string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	cfg := ProxyConfig{Upstream: upstream, OutDir: dir, Tokenizer: testTok, SyncEvery: 50 * time.Millisecond}
	if os.Getenv("TRACEKIT_PROXY_BENCH") == "1" {
		cfg.SyncEvery = 0
	}
	if os.Getenv("TRACEKIT_PROXY_SLOW_FSYNC") == "1" { // a disk whose fsync takes a minute
		cfg.syncFile = func(f *os.File) error { time.Sleep(time.Minute); return f.Sync() }
	}
	if n, err := strconv.Atoi(os.Getenv("TRACEKIT_PROXY_GOMAXPROCS")); err == nil && n > 0 {
		runtime.GOMAXPROCS(n)
	}
	defer profileTo(os.Getenv("TRACEKIT_PROXY_CPUPROFILE"), pprof.StartCPUProfile, pprof.StopCPUProfile)()
	defer profileTo(os.Getenv("TRACEKIT_PROXY_TRACE"), rtrace.Start, rtrace.Stop)()
	ps, err := StartProxy(cfg, "")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(ps.URL())
	<-sig
	if err := ps.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the proxy:", err)
		os.Exit(1)
	}
}

func readRecordsT(t *testing.T, path string) ([]trace.Record, trace.RunMeta) {
	t.Helper()
	recs, meta, err := trace.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs, meta
}

// profileTo starts a profile (start) written to path, when path is set,
// and returns what stops it and closes the file; a failure to start ends
// the child with exit status 1.
func profileTo(path string, start func(io.Writer) error, stop func()) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = start(f)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	return func() { stop(); f.Close() }
}
