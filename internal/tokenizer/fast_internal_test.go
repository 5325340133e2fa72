package tokenizer

import (
	"maps"
	"testing"

	tk "github.com/tiktoken-go/tokenizer"
)

// TestFastSharesVocabulary: the fast counter uses the codec's own
// vocabulary (no second table per process) with the library version in
// go.mod, and that table is exactly what Decode reads back id by id (the
// path taken with a library laid out otherwise).
func TestFastSharesVocabulary(t *testing.T) {
	for _, name := range []string{"o200k_base", "cl100k_base"} {
		tok, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		f := tok.(tiktoken).fast
		if !f.shared {
			t.Fatalf("%s: the codec's vocabulary was not found (tiktoken-go's codec.Codec changed?): each process now builds its own", name)
		}
		c, err := tk.Get(tk.Encoding(name))
		if err != nil {
			t.Fatal(err)
		}
		decoded := decodeRanks(c)
		if !maps.Equal(decoded, f.ranks) {
			t.Fatalf("%s: Decode reads back %d tokens, the codec holds %d, or they differ", name, len(decoded), len(f.ranks))
		}
		// Count through the Decode-built table agrees too.
		g := &fastBPE{codec: c, split: f.split, ranks: decoded}
		for _, s := range []string{"Hello world, it's THEY'RE 12345 \n\n  x", "naïve café ’s", "a\x7fb"} {
			if got, want := g.Count(s), f.Count(s); got != want {
				t.Errorf("%s: Count(%q) = %d with the decoded table, %d with the codec's", name, s, got, want)
			}
		}
	}
}
