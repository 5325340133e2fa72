// Package hugepage grows slices whose backing arrays the kernel may map
// with transparent huge pages. In flows a slice and the room wanted; out
// comes the slice with that room, its new backing array advised for huge
// pages (Linux's MADV_HUGEPAGE) when it is large enough to hold one.
//
// Why: memory fresh from the system is mapped page by page on first
// write, and on a virtual machine each 4 KiB fault costs microseconds. A
// command that fills tens of megabytes once (analyze's per-event samples,
// a recording's decoded event lists) spent a fifth of its time in those
// faults. Where the system's setting is "madvise" (a common default) the
// Go heap gets huge pages only when asked; with "always" or "never" the
// advice changes nothing.
package hugepage
