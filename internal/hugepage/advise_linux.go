//go:build linux

package hugepage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// advise marks the whole huge pages of [p, p+n) for huge pages. Best
// effort: a kernel without transparent huge pages refuses, and the memory
// is then mapped as before.
func advise(p unsafe.Pointer, n uintptr) {
	start, length := whole(uintptr(p), n)
	if length == 0 {
		return
	}
	// The range lies inside the Go heap's mapping, which outlives it.
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), length)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}
