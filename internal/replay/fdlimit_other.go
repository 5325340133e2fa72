//go:build !linux && !darwin

package replay

// raiseFileLimit is a no-op where RLIMIT_NOFILE does not apply.
func raiseFileLimit() (soft, hard uint64, ok bool) { return 0, 0, false }
