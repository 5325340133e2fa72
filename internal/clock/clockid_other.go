//go:build !darwin

package clock

import "golang.org/x/sys/unix"

// monoClockID is the clock Go's runtime reads for its monotonic time.
const monoClockID = unix.CLOCK_MONOTONIC
