package clock

import (
	"testing"
	"time"
)

// TestRealToMonoConverts: a wall-clock reading converts to within the
// measure's width (plus the two reads' own gap) of Mono read beside it,
// and a conversion after the interval re-measures.
func TestRealToMonoConverts(t *testing.T) {
	c := NewRealToMono(time.Millisecond)
	for range 100 {
		before := Mono()
		m := c.Mono(Wall())
		after := Mono()
		_, w := c.Offset()
		if m < before-w-int64(time.Microsecond) || m > after+w+int64(time.Microsecond) {
			// A wall-clock step between the reads could do this; so
			// could a wrong sign or unit, which is what this catches.
			t.Fatalf("converted %d outside [%d, %d] (width %d)", m, before, after, w)
		}
	}
	time.Sleep(2 * time.Millisecond)
	c.Mono(Wall())
	if c.Remeasures() < 1 {
		t.Errorf("no re-measure after the interval passed")
	}
	if c.Every() != time.Millisecond {
		t.Errorf("interval %v", c.Every())
	}
}
