package fnv1a

import (
	"hash/fnv"
	"testing"
)

// The running value equals the standard library's FNV-64a, whole or
// continued piece by piece.
func TestMatchesHashFNV(t *testing.T) {
	for _, s := range []string{"", "a", "conv-0042", "role\x00content\x00", "ünïcode"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := String(s), h.Sum64(); got != want {
			t.Errorf("String(%q) = %x, want %x", s, got, want)
		}
		g := Offset
		for i := 0; i < len(s); i++ {
			g = AddByte(g, s[i])
		}
		if g != h.Sum64() {
			t.Errorf("AddByte over %q = %x, want %x", s, g, h.Sum64())
		}
		if len(s) > 1 && AddString(String(s[:1]), s[1:]) != h.Sum64() {
			t.Errorf("AddString does not continue String for %q", s)
		}
	}
}
