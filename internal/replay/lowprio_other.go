//go:build !linux

package replay

// backgroundThread does nothing where a thread's priority cannot be set
// apart from its process's.
func backgroundThread(idle bool) {}
