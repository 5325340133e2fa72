package hugepage

import (
	"slices"
	"testing"
)

// Grow keeps the elements, gives at least the room asked, and returns s
// itself when it has that room already.
func TestGrow(t *testing.T) {
	s := []int64{1, 2, 3}
	g := Grow(s, 1<<20)
	if !slices.Equal(g, s) || cap(g)-len(g) < 1<<20 {
		t.Fatalf("Grow: len %d cap %d, first %v", len(g), cap(g), g[:min(3, len(g))])
	}
	if h := Grow(g, 5); &h[0] != &g[0] || len(h) != 3 {
		t.Error("Grow with room enough made a new array")
	}
	if e := Grow([]float64(nil), 0); e != nil {
		t.Error("Grow of nothing by nothing allocated")
	}
}

// whole is the whole huge pages inside a range, none when the range holds
// none.
func TestWhole(t *testing.T) {
	for _, c := range []struct{ p, n, start, length uintptr }{
		{0, 2 * Size, 0, 2 * Size},
		{1, 2 * Size, Size, Size},
		{Size - 1, Size + 1, Size, Size},
		{Size - 1, Size, Size, 0},
		{3 * Size, Size - 1, 3 * Size, 0},
		{10, 100, Size, 0},
	} {
		start, length := whole(c.p, c.n)
		if length != c.length || length > 0 && start != c.start {
			t.Errorf("whole(%#x, %#x) = %#x, %#x; want %#x, %#x", c.p, c.n, start, length, c.start, c.length)
		}
	}
}
