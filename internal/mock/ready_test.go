package mock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadyFileRoundTrip(t *testing.T) {
	srv := startMock(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "ready.json")
	if _, err := ReadReadyFile(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("before writing: %v, want not-exist", err)
	}
	want := srv.Ready()
	if want.URL != srv.URL() || "http://"+want.Addr != want.URL || want.PID != os.Getpid() {
		t.Fatalf("ready %+v for %s", want, srv.URL())
	}
	for range 2 { // the second write replaces the first
		if err := WriteReadyFile(path, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadReadyFile(path)
	if err != nil || got != want {
		t.Fatalf("read %+v, %v; want %+v", got, err, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the directory, want only the ready file (no temp left)", len(ents))
	}
	os.WriteFile(path, []byte(`{"url":"http://x"}`), 0o644)
	if _, err := ReadReadyFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("incomplete ready file: %v", err)
	}
	if err := WriteReadyFile(filepath.Join(dir, "missing", "r.json"), want); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("ready file in a missing directory: %v", err)
	}
}
