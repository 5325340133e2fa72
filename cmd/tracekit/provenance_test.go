package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A replay records its trace file's SHA-256 and size; the report page and
// inspect show them. A recording from before says "not recorded".
func TestTraceDigestInReportAndInspect(t *testing.T) {
	tr, target := replayFixture(t)
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	want := fmt.Sprintf("%s (%s bytes)", hex.EncodeToString(sum[:]), groupDigits(len(b)))
	dir := t.TempDir()
	out, page := filepath.Join(dir, "run.parquet"), filepath.Join(dir, "run.html")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", target, "--model", "tracekit-mock", "--no-analyze", "--progress", "none", "-o", out); code != ExitOK {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "analyze", out, "--html", page); code != ExitOK {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	h, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), "<dt>trace SHA-256</dt><dd>"+want+"</dd>") {
		t.Errorf("the page lacks the trace's digest %s", want)
	}
	ins, stderr, code := runCLI(t, "inspect", out)
	if code != ExitOK || !strings.Contains(ins, "trace file "+tr+", SHA-256 "+want) {
		t.Errorf("inspect exit %d (%s), output lacks the digest %s:\n%s", code, stderr, want, ins)
	}
	old, _, code := runCLI(t, "inspect", "../../testdata/recording-v1.parquet")
	if code != ExitOK || !strings.Contains(old, "trace file gtrace.parquet, SHA-256 not recorded") {
		t.Errorf("an old recording: exit %d:\n%s", code, old)
	}
}

// groupDigits writes n with commas between groups of three digits.
func groupDigits(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
