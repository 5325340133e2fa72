package record

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// A recording being written is locked: a second Recorder (or a lock taken
// by hand) on the same path fails naming this process, and Close frees the
// path and removes the lock file.
func TestRecorderLocksItsPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.parquet")
	r, err := NewRecorder(path, trace.RunMeta{}, RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(LockPath(path)); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid", b, err)
	}
	_, err = NewRecorder(path, trace.RunMeta{}, RecorderOptions{})
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second recorder on a locked path: %v", err)
	}
	if _, err := os.Stat(JournalPath(path)); err != nil {
		t.Fatalf("the refused recorder touched the journal: %v", err)
	}
	rec := testRecord(1)
	r.Submit(&rec)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(LockPath(path)); !os.IsNotExist(err) {
		t.Fatalf("lock file left after Close: %v", err)
	}
	l, err := LockOutput(path)
	if err != nil {
		t.Fatalf("locking after Close: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
}

// A caller holding the lock passes it to the Recorder, which neither takes
// nor releases it.
func TestRecorderCallerHeldLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.parquet")
	l, err := LockOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	r, err := NewRecorder(path, trace.RunMeta{}, RecorderOptions{Lock: l})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := LockOutput(path); err == nil {
		t.Fatal("the Recorder released the caller's lock")
	}
}
