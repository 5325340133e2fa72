package capture

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// TestMain lets the SIGKILL test re-exec this binary as a proxy child.
func TestMain(m *testing.M) {
	if dir := os.Getenv("TRACEKIT_PROXY_CHILD"); dir != "" {
		proxyChild(dir, os.Getenv("TRACEKIT_PROXY_UPSTREAM"))
		return
	}
	os.Exit(m.Run())
}

// proxyChild runs a capture proxy, prints its URL and serves until killed.
func proxyChild(dir, upstream string) {
	ps, err := StartProxy(ProxyConfig{Upstream: upstream, OutDir: dir, Tokenizer: testTok, SyncEvery: 50 * time.Millisecond}, "")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(ps.URL())
	select {}
}

func readRecordsT(t *testing.T, path string) ([]trace.Record, trace.RunMeta) {
	t.Helper()
	recs, meta, err := trace.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs, meta
}
