//go:build linux || darwin

package replay

import "golang.org/x/sys/unix"

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit (Go's
// runtime does the same at start on these systems; doing it here keeps it
// true whatever the runtime does) and returns the soft and hard limits
// afterwards; ok is false when they cannot be read.
func raiseFileLimit() (soft, hard uint64, ok bool) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 0, 0, false
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &want) == nil {
			lim.Cur = lim.Max
		}
	}
	return lim.Cur, lim.Max, true
}
