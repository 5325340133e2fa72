package hugepage

import "unsafe"

// Size is the huge page size advised for (x86-64 and arm64 with 4 KiB
// base pages).
const Size = 2 << 20

// Grow returns s with room for at least n more elements, like
// slices.Grow, except that a new backing array is not cleared beyond what
// the runtime clears, and the huge pages it holds whole are advised
// (advise) before anything is written to them: the first write to each
// then maps 2 MiB.
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
