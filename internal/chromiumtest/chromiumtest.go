// Package chromiumtest runs headless Chromium for the opt-in render checks
// (make render-check installs Chromium and sets TRACEKIT_CHROMIUM): the
// HTML reports and the live page, rendered by a real browser. A browser
// is not part of make test: without the variable the checks skip.
//
// In: a test, the pages' URLs and Chromium's own arguments (--dump-dom,
// --screenshot=FILE, ...). Out: what Chromium wrote to stdout.
package chromiumtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Path is the Chromium of the render checks, TRACEKIT_CHROMIUM; the test
// skips without it (and with -short), and fails when it names no file.
func Path(t testing.TB) string {
	t.Helper()
	chromium := os.Getenv("TRACEKIT_CHROMIUM")
	if chromium == "" {
		t.Skip("TRACEKIT_CHROMIUM is not set (make render-check)")
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("TRACEKIT_CHROMIUM: %v", err)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	return chromium
}

// Run runs chromium headless with args after the flags every check
// shares, a profile of its own under dir named after name, and returns
// its stdout. Chromium may crash on a loaded machine: a failed launch is
// logged and tried once more, and a second failure fails the test. Each
// launch is bounded (a hang guard, not a budget).
func Run(t testing.TB, chromium, dir, name string, args ...string) []byte {
	t.Helper()
	var err error
	for try := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
			"--user-data-dir=" + filepath.Join(dir, fmt.Sprintf("profile-%s-%d", name, try))}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var out []byte
		out, err = cmd.Output()
		cancel()
		if err == nil {
			return out
		}
		t.Logf("chromium %s, launch %d: %v\n%s", name, try+1, err, stderr.String())
	}
	t.Fatalf("chromium %s failed twice: %v", name, err)
	return nil
}
