package clock

import "golang.org/x/sys/unix"

// monoClockID is the clock Go's runtime reads on macOS (mach_absolute_time):
// CLOCK_MONOTONIC there also counts time asleep, so its offset would drift.
const monoClockID = unix.CLOCK_UPTIME_RAW
