package clock

import (
	"runtime"
	"testing"
	"time"
)

// The read-only adjtimex call answers on Linux with a state whose bounds
// are consistent (the estimate never exceeds the maximum).
func TestReadSync(t *testing.T) {
	s := ReadSync()
	t.Logf("%+v", s)
	if runtime.GOOS != "linux" {
		if s.Known {
			t.Fatalf("known sync state off Linux: %+v", s)
		}
		return
	}
	if !s.Known || s.Source != "adjtimex" {
		t.Fatalf("adjtimex not read: %+v", s)
	}
	if s.EstErrorNs < 0 || s.MaxErrorNs < 0 || (s.Synced && s.EstErrorNs > s.MaxErrorNs) {
		t.Errorf("inconsistent bounds: %+v", s)
	}
}

// WallMinusMono agrees with Go's own pairing of the two clocks in
// time.Now (which reads both) to within its stated error and a margin for
// the reads between.
func TestWallMinusMono(t *testing.T) {
	off, width := WallMinusMono()
	if width <= 0 || width > int64(time.Second) {
		t.Fatalf("bracket width %d ns", width)
	}
	mono := Mono()
	wall := Wall()
	mono2 := Mono()
	if d := wall - off - mono; d < -width || d > mono2-mono+width+int64(time.Millisecond) {
		t.Errorf("wall - offset is %d ns from mono (bracket %d ns)", d, width)
	}
}
