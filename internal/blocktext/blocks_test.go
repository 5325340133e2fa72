package blocktext

import (
	"slices"
	"sync"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

var (
	impCorpusOnce sync.Once
	impCorpus     *Corpus
	impCorpusErr  error
)

// importCorpus is the default corpus under o200k, built once per test binary.
func importCorpus(t testing.TB) *Corpus {
	t.Helper()
	impCorpusOnce.Do(func() { impCorpus, impCorpusErr = DefaultCorpus(tokenizer.Default()) })
	if impCorpusErr != nil {
		t.Fatalf("default corpus: %v", impCorpusErr)
	}
	return impCorpus
}

func TestBlocksTokenExact(t *testing.T) {
	c := importCorpus(t)
	tok := c.Tokenizer()
	b, err := NewBlocks(c, 16)
	if err != nil {
		t.Fatal(err)
	}
	// The prompt encodes to the concatenation of its blocks' tokens.
	hashes := []int64{0, 7, 123456, 99}
	for _, n := range []int{1, 3, 16, 17, 40, 64, 100} {
		p := b.Text(hashes, n, 5)
		got := tok.Encode(p)
		if len(got) != n {
			t.Fatalf("n=%d: prompt encodes to %d tokens", n, len(got))
		}
		var want []uint
		for j := 0; j*16 < n; j++ {
			r := min(16, n-j*16)
			h := fillerHash(5, j)
			if j < len(hashes) {
				h = hashes[j]
			}
			want = append(want, tok.Encode(b.Text([]int64{h}, r, -1))...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: prompt tokens are not the concatenation of its block tokens", n)
		}
	}
}

func TestBlocksSharedPrefix(t *testing.T) {
	c := importCorpus(t)
	tok := c.Tokenizer()
	b, err := NewBlocks(c, 32)
	if err != nil {
		t.Fatal(err)
	}
	a := tok.Encode(b.Text([]int64{1, 2, 3}, 90, 1))
	d := tok.Encode(b.Text([]int64{1, 2, 4}, 96, 2))
	if !slices.Equal(a[:64], d[:64]) {
		t.Fatal("prompts sharing hashes [1 2] differ in their first 64 tokens")
	}
	if slices.Equal(a[64:68], d[64:68]) {
		t.Fatal("blocks 3 and 4 start with the same tokens")
	}
	// A clamped (partial) block is a prefix of the full block.
	full := tok.Encode(b.Text([]int64{1, 2, 3}, 96, 3))
	if !slices.Equal(a, full[:90]) {
		t.Fatal("a 26-token block 3 is not a prefix of the 32-token block 3")
	}
	// Requests without hashes get private text: different salts differ.
	if b.Text(nil, 64, 1) == b.Text(nil, 64, 2) {
		t.Fatal("filler prompts of two salts are equal")
	}
}

func TestBlocksRejectsBadSize(t *testing.T) {
	if _, err := NewBlocks(importCorpus(t), 0); err == nil {
		t.Fatal("block size 0 accepted")
	}
}
