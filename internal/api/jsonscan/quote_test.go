package jsonscan

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// AppendQuoted writes strings encoding/json reads back as they were, and
// AppendString (the decoders' reader) decodes them alike, for every byte
// that needs escaping and UTF-8 around it.
func TestAppendQuoted(t *testing.T) {
	pieces := []string{"a", "é", "😀", `"`, `\`, "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "/", "<", " ", "\u2028"}
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var s []byte
		for range r.IntN(30) {
			s = append(s, pieces[r.IntN(len(pieces))]...)
		}
		q := AppendQuoted([]byte("x"), s)[1:]
		var got string
		if err := json.Unmarshal(q, &got); err != nil || got != string(s) {
			t.Fatalf("AppendQuoted(%q) = %s: decodes to %q, %v", s, q, got, err)
		}
		end, dec := AppendString(q, 0, nil)
		if end != len(q) || string(dec) != string(s) {
			t.Fatalf("AppendString(%s) = %d %q, want %d %q", q, end, dec, len(q), s)
		}
		if string(AppendQuoted(nil, string(s))) != string(q) {
			t.Fatalf("string and []byte forms differ for %q", s)
		}
	}
}
