package synth

import (
	"context"
	"os"
	"strings"
	"testing"
)

// Over the real Mooncake sample, every pair of a request and the latest
// earlier one with the same first block shares exactly the token prefix
// Blocks states: k*512 tokens for k common hashes, plus the leading tag
// digits their next hashes have in common (Blocks' bound), cut to the
// shorter prompt. Token prefixes are word prefixes (one token per word,
// which Blocks checks on its stream), so words are compared.
func TestMooncakePrefixReuseExact(t *testing.T) {
	if _, err := os.Stat(sharedMooncake); err != nil {
		t.Skip("shared Mooncake trace not present")
	}
	m := &Mooncake{Opts: ImportOptions{Path: sharedMooncake}}
	convs, err := m.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := NewBlocks(importCorpus(t), MooncakeBlockSize)
	if err != nil {
		t.Fatal(err)
	}
	B, V := MooncakeBlockSize, uint64(blocks.TagBase())
	words := func(s string) []string { return strings.SplitAfter(s, " ")[1:] } // " a b" -> "a ", "b"
	last := map[int64]int{}
	pairs, extra := 0, 0
	for i, c := range convs {
		a := c[0]
		if len(a.PrefixHashes) == 0 {
			continue
		}
		j, ok := last[a.PrefixHashes[0]]
		last[a.PrefixHashes[0]] = i
		if !ok {
			continue
		}
		b := convs[j][0]
		k := 0
		for k < len(a.PrefixHashes) && k < len(b.PrefixHashes) && a.PrefixHashes[k] == b.PrefixHashes[k] {
			k++
		}
		e := 0
		if k < len(a.PrefixHashes) && k < len(b.PrefixHashes) {
			x, y := uint64(a.PrefixHashes[k]), uint64(b.PrefixHashes[k])
			for e < 4 && x%V == y%V {
				x, y, e = x/V, y/V, e+1
			}
		}
		na, nb := min(int(a.InputTokens), B*(k+1)), min(int(b.InputTokens), B*(k+1))
		wa := words(blocks.Text(a.PrefixHashes, na, a.Messages[0].BlockSeed))
		wb := words(blocks.Text(b.PrefixHashes, nb, b.Messages[0].BlockSeed))
		common := 0
		for common < len(wa) && common < len(wb) && strings.TrimSpace(wa[common]) == strings.TrimSpace(wb[common]) {
			common++
		}
		want := min(k*B+e, na, nb)
		if common != want {
			t.Fatalf("%s and %s: %d common hashes, %d equal next digits: %d tokens shared, want %d", a.ConversationID, b.ConversationID, k, e, common, want)
		}
		pairs++
		if e > 0 && want == k*B+e {
			extra++
		}
	}
	if pairs < 1000 {
		t.Fatalf("only %d pairs share a first block", pairs)
	}
	t.Logf("%d pairs checked; %d share e > 0 tag digits beyond their common hash prefix (V = %d)", pairs, extra, V)
}
