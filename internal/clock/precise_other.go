//go:build !linux

package clock

import "time"

// Precise wakes goroutines at absolute instants of Mono. Without a timerfd
// (macOS, the BSDs) it is timerPrecise: Go timers and a short spin, with a
// larger lag than Linux's (docs/design/dispatcher.md).
type Precise = timerPrecise

// NewPrecise returns a Precise. spin is how long before its deadline each
// waiter is released to busy-wait the rest: 0 never spins, AdaptiveSpin
// follows the measured wake-up lateness. Close releases the waiters.
func NewPrecise(spin time.Duration) (*Precise, error) { return newTimerPrecise(spin), nil }
