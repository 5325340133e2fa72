package trace

import (
	"strings"
	"sync"
	"unsafe"
)

// timeColumns are Record's run-relative times: the int64 fields and
// int64 lists whose Go name ends in Ns (their columns are *_ns, and
// event_gap_us for EventNs), found by reflection (recordColumns), so a
// time field added to Record is shifted without a change here. unset is
// true for a field tagged unset:"0", where 0 means "not stamped".
var timeColumns = sync.OnceValue(func() (cols []recordColumn) {
	for _, c := range recordColumns() {
		if (c.kind == kInt64 || c.kind == kListInt64) && strings.HasSuffix(c.field, "Ns") {
			cols = append(cols, c)
		}
	}
	return cols
})

// Shift moves every time of r by off nanoseconds (aligning the shards of
// one run on a common start), in place; a time tagged unset:"0" that is 0
// stays 0.
func (r *Record) Shift(off int64) {
	if off == 0 {
		return
	}
	p := unsafe.Pointer(r)
	for _, c := range timeColumns() {
		at := unsafe.Add(p, c.off) // the offset reflection gave for this field of Record
		if c.kind == kListInt64 {
			for i, ts := 0, *(*[]int64)(at); i < len(ts); i++ {
				ts[i] += off
			}
			continue
		}
		if v := (*int64)(at); *v != 0 || !c.unset {
			*v += off
		}
	}
}
