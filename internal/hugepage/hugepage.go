package hugepage

import "unsafe"

// Size is the huge page size advised for (x86-64 and arm64 with 4 KiB
// base pages).
const Size = 2 << 20

// Grow returns s with room for at least n more elements, like
// slices.Grow, except that the huge pages a new backing array holds whole
// are advised (advise) before anything is written to them, so the first
// write to each maps 2 MiB. slices.Grow would write zeros over the new
// room first, mapping it 4 KiB at a time; make leaves memory fresh from
// the system as it is (zero already).
func Grow[T any](s []T, n int) []T {
	if n <= cap(s)-len(s) {
		return s
	}
	g := make([]T, len(s), len(s)+n)
	var z T
	if bytes := uintptr(cap(g)) * unsafe.Sizeof(z); bytes >= Size {
		advise(unsafe.Pointer(unsafe.SliceData(g)), bytes)
	}
	copy(g, s)
	return g
}

// whole is the part of [p, p+n) made of whole huge pages: its start and
// length, 0 when there is none.
func whole(p, n uintptr) (start, length uintptr) {
	start = (p + Size - 1) &^ (Size - 1)
	if start >= p+n {
		return start, 0
	}
	return start, (p + n - start) &^ (Size - 1)
}
