// Package clock gives every tracekit process one time base: nanoseconds of
// the system monotonic clock (CLOCK_MONOTONIC on Linux; CLOCK_UPTIME_RAW on
// macOS, the clock Go's runtime reads there), which is comparable across
// processes on one host. A recording's client stamps and the mock's
// ground-truth log are both in it, so they can be joined without guessing.
//
// Mono reads Go's own monotonic clock (a vDSO call, no syscall) and adds the
// offset to that system clock measured once at start-up; Go's runtime reads
// the same clock, so the offset is constant.
//
// Precise waits for absolute instants of that clock. On Linux it parks on a
// timerfd, with tens of microseconds of lateness (Go's own timers can be a
// millisecond late); elsewhere it falls back to Go timers and a short spin
// (precise_timer.go). It wakes replay's requests and the mock's stream
// events.
//
// WallMinusMono pairs the wall clock with Mono (a start instant given in
// wall time is waited for on Mono), and ReadSync reports how far the host's
// wall clock can be trusted (adjtimex on Linux, "unknown" elsewhere).
package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

var (
	base   = time.Now()
	offset = measureOffset()
)

// measureOffset returns the system clock (monoClockID) at base, taking the narrowest of a
// few bracketing reads so the error is a few tens of nanoseconds.
func measureOffset() int64 {
	best, bestWidth := int64(0), time.Duration(1<<62)
	for range 16 {
		before := time.Since(base)
		var ts unix.Timespec
		if err := unix.ClockGettime(monoClockID, &ts); err != nil {
			panic("clock: the monotonic system clock is unavailable: " + err.Error())
		}
		after := time.Since(base)
		if w := after - before; w < bestWidth {
			bestWidth = w
			best = ts.Nano() - int64(before+after)/2
		}
	}
	return best
}

// Mono returns the monotonic system clock (CLOCK_MONOTONIC on Linux) in
// nanoseconds.
func Mono() int64 { return offset + int64(time.Since(base)) }

// Wall returns the wall clock in unix nanoseconds.
func Wall() int64 { return time.Now().UnixNano() }

// Since returns nanoseconds elapsed from a Mono reading.
func Since(mono int64) int64 { return Mono() - mono }
