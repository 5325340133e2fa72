package clock

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Mono must agree with a direct CLOCK_MONOTONIC read to within the time the
// reads take: otherwise files from two processes could not be joined.
func TestMonoMatchesClockGettime(t *testing.T) {
	for range 100 {
		a := Mono()
		var ts unix.Timespec
		if err := unix.ClockGettime(monoClockID, &ts); err != nil {
			t.Fatal(err)
		}
		b := Mono()
		if ts.Nano() < a-2000 || ts.Nano() > b+2000 {
			t.Fatalf("system clock %d outside Mono bracket [%d, %d] (+-2us)", ts.Nano(), a, b)
		}
	}
}

func TestMonoIsMonotonic(t *testing.T) {
	prev := Mono()
	for range 10000 {
		now := Mono()
		if now < prev {
			t.Fatalf("Mono went backwards: %d then %d", prev, now)
		}
		prev = now
	}
}
