//go:build !linux

package clock

// ReadSync reports an unknown state: only Linux's adjtimex is read.
func ReadSync() SyncState { return SyncState{Source: "not read on this platform"} }
