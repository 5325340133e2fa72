package record

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// Discard leaves no file behind, and an older recording at the path is
// kept as it was.
func TestDiscardRemovesEverything(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.parquet")
	if err := os.WriteFile(path, []byte("an older recording"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewRecorder(path, trace.RunMeta{}, RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Submit(&trace.Record{RequestID: "x"})
	if err := r.Discard(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil { // after Discard: nothing more
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "run.parquet" {
		t.Fatalf("left in the directory: %v", entries)
	}
	if b, _ := os.ReadFile(path); string(b) != "an older recording" {
		t.Fatalf("the older file was touched: %q", b)
	}
}
