package procs

import (
	"runtime"
	"testing"
)

// Reservations add up and are undone in any order; a release called twice
// counts once; Base stays what the process had.
func TestReserveAddsAndRestores(t *testing.T) {
	start := runtime.GOMAXPROCS(0)
	a := Reserve(1)
	if got := runtime.GOMAXPROCS(0); got != start+1 {
		t.Fatalf("after Reserve(1): GOMAXPROCS %d, want %d", got, start+1)
	}
	b := Reserve(2)
	if got := runtime.GOMAXPROCS(0); got != start+3 {
		t.Fatalf("after Reserve(2): GOMAXPROCS %d, want %d", got, start+3)
	}
	if got := Base(); got != start {
		t.Errorf("Base %d with 3 reserved, want %d", got, start)
	}
	a()
	a()
	if got := runtime.GOMAXPROCS(0); got != start+2 {
		t.Fatalf("after the first release (twice): GOMAXPROCS %d, want %d", got, start+2)
	}
	b()
	if got := runtime.GOMAXPROCS(0); got != start {
		t.Fatalf("after both releases: GOMAXPROCS %d, want %d", got, start)
	}
	Reserve(0)()
	if got := runtime.GOMAXPROCS(0); got != start {
		t.Fatalf("Reserve(0): GOMAXPROCS %d, want %d", got, start)
	}
}
