package blocktext

import (
	"fmt"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// Corpus hands out text of an exact token length under one tokenizer.
//
// The text is encoded once. Every token i has a byte offset off[i] with
// text[off[i]:off[i+1]] its bytes, so a run of tokens is a substring and
// costs nothing to cut. A cut is only made at a "joinable" boundary: one
// where the next token starts with a space, the previous text ends with a
// non-space, and re-encoding a window of windowTokens tokens on either side
// of the cut gives back exactly the corpus's own tokens. Cutting at two such
// boundaries therefore yields text that re-encodes to exactly the tokens
// between them, and because every piece starts with " word" and ends with a
// non-space, pieces can be concatenated with their counts adding up.
// Whether a boundary is joinable is decided lazily and remembered, so the
// cost is a few short encodes per distinct cut, never a re-encode of the
// result.
//
// A Corpus is safe for concurrent use.
type Corpus struct {
	tok  tokenizer.Tokenizer
	text string
	ids  []uint
	off  []int // len(ids)+1 byte offsets; off[len(ids)] == len(text)
	// cut[i] caches whether the boundary before token i is joinable:
	// 0 unknown, 1 yes, 2 no.
	cut []atomic.Uint32
	// invalidUTF8 counts the bytes of the given text that were not UTF-8
	// (dropped).
	invalidUTF8 int64
	isDefault   bool // DefaultCorpus under an embedded tokenizer
	// asciiCuts: under o200k_base and cl100k_base, " letter" after an
	// ASCII non-space always starts a pre-token (their split patterns
	// admit a space before letters only as a pre-token's first byte, and
	// have no look-behind), and BPE never merges across pre-tokens, so
	// such a cut needs no re-encoding: the text on either side encodes to
	// the corpus's own tokens (checked on pieces by the corpus tests).
	asciiCuts bool
}

// windowTokens is how many tokens on each side of a cut are re-encoded to
// prove the cut does not change the tokenization around it. BPE merges and
// pre-tokenizer splits are local, so a few tokens suffice.
const windowTokens = 6

// minCorpusTokens is the smallest corpus accepted: below it, too few cuts
// exist for varied text.
const minCorpusTokens = 64

// NewCorpus encodes text with tok. The text is treated as circular: Text
// wraps from its end to its start, joined by a newline.
//
// Bytes of text that are not UTF-8 are dropped and counted (InvalidUTF8).
func NewCorpus(text string, tok tokenizer.Tokenizer) (*Corpus, error) {
	invalid := InvalidUTF8Bytes(text)
	text = strings.TrimSpace(strings.ToValidUTF8(text, "")) + "\n"
	ids := encode(tok, text)
	if len(ids) < minCorpusTokens {
		return nil, fmt.Errorf("building corpus: text has %d tokens under %s, need at least %d", len(ids), tok.Name(), minCorpusTokens)
	}
	off := make([]int, len(ids)+1)
	var one [1]uint
	pos := 0
	for i, id := range ids {
		one[0] = id
		piece := tok.Decode(one[:])
		if !strings.HasPrefix(text[pos:], piece) {
			return nil, fmt.Errorf("building corpus: tokenizer %s does not decode token %d (id %d) back to the text at byte %d", tok.Name(), i, id, pos)
		}
		off[i] = pos
		pos += len(piece)
	}
	if pos != len(text) {
		return nil, fmt.Errorf("building corpus: tokenizer %s decodes %d of %d bytes", tok.Name(), pos, len(text))
	}
	off[len(ids)] = pos
	c := &Corpus{tok: tok, text: text, ids: ids, off: off, cut: make([]atomic.Uint32, len(ids)), invalidUTF8: invalid,
		asciiCuts: asciiCutsTokenizer(tok)}
	if k := min(windowTokens, len(ids)/2); !c.sameTokens(c.span(len(ids)-k, 2*k), len(ids)-k, 2*k) {
		return nil, fmt.Errorf("building corpus: under %s the end of the text merges with its start when wrapped; end the text with a sentence", tok.Name())
	}
	found := 0
	for i := 0; i < min(len(ids), 4096) && found < 8; i++ {
		if c.joinable(i) {
			found++
		}
	}
	if found < 8 {
		return nil, fmt.Errorf("building corpus: fewer than 8 word boundaries in the first %d tokens survive re-encoding under %s; use prose with spaces between words", min(len(ids), 4096), tok.Name())
	}
	return c, nil
}

// Tokens is the corpus length in tokens.
func (c *Corpus) Tokens() int { return len(c.ids) }

// InvalidUTF8 is the count of bytes of the text given to NewCorpus that
// were not UTF-8 and were left out.
func (c *Corpus) InvalidUTF8() int64 { return c.invalidUTF8 }

// BytesPerToken is the corpus's mean token length in bytes.
func (c *Corpus) BytesPerToken() float64 { return float64(len(c.text)) / float64(len(c.ids)) }

// Tokenizer is the tokenizer the corpus counts with.
func (c *Corpus) Tokenizer() tokenizer.Tokenizer { return c.tok }

// Text returns text of exactly n tokens under the corpus's tokenizer,
// starting at the first joinable boundary at or after token offset (taken
// modulo the corpus length) whose end is joinable too. The text starts with
// a space and ends with a non-space. Same arguments, same text.
func (c *Corpus) Text(offset, n int) string {
	if n <= 0 {
		return ""
	}
	N := len(c.ids)
	s := ((offset % N) + N) % N
	for range N {
		if c.joinable(s) && c.joinable((s+n)%N) {
			return c.span(s, n)
		}
		s = (s + 1) % N
	}
	// Unreachable for a corpus NewCorpus accepted unless n lands every
	// start on a bad end; fall back to a counted fill.
	return c.fill(s, n)
}

// span is the text of tokens [s, s+n) of the circular corpus.
func (c *Corpus) span(s, n int) string {
	N := len(c.ids)
	if s+n <= N {
		return c.text[c.off[s]:c.off[s+n]]
	}
	var b strings.Builder
	b.Grow((n/N + 2) * len(c.text))
	for n > 0 {
		k := min(n, N-s)
		b.WriteString(c.text[c.off[s]:c.off[s+k]])
		n -= k
		s = (s + k) % N
	}
	return b.String()
}

// fill adjusts the length of a span until it counts exactly n tokens,
// trimming or extending by the difference; it is the slow path.
func (c *Corpus) fill(s, n int) string {
	m := n
	for range 16 {
		t := c.span(s, m)
		got := c.tok.Count(t)
		if got == n {
			return t
		}
		m += n - got
		if m <= 0 {
			m = 1
		}
	}
	return c.span(s, m)
}

// joinable reports whether the boundary before token i can be cut.
func (c *Corpus) joinable(i int) bool {
	switch c.cut[i].Load() {
	case 1:
		return true
	case 2:
		return false
	}
	ok := c.checkCut(i)
	v := uint32(2)
	if ok {
		v = 1
	}
	c.cut[i].Store(v)
	return ok
}

func (c *Corpus) checkCut(i int) bool {
	next := c.text[c.off[i]:]
	if !strings.HasPrefix(next, " ") || len(next) < 2 || next[1] == ' ' {
		return false
	}
	prevEnd := c.off[i]
	if i == 0 {
		prevEnd = len(c.text)
	}
	last, _ := utf8.DecodeLastRuneInString(c.text[:prevEnd])
	if unicode.IsSpace(last) {
		return false
	}
	if c.asciiCuts && last < utf8.RuneSelf && isLetter(next, 1) {
		return true
	}
	return c.windowCut(i)
}

// windowCut is the tokenizer-agnostic proof of a cut: both sides
// re-encode to the corpus's own tokens.
func (c *Corpus) windowCut(i int) bool {
	N := len(c.ids)
	k := min(windowTokens, N/2)
	left := c.span((i-k+N)%N, k)
	right := c.span(i, k)
	return c.sameTokens(left, (i-k+N)%N, k) && c.sameTokens(right, i, k)
}

// sameTokens reports whether encoding t gives the corpus tokens [s, s+k).
func (c *Corpus) sameTokens(t string, s, k int) bool {
	got := c.tok.Encode(t)
	if len(got) != k {
		return false
	}
	N := len(c.ids)
	for j, id := range got {
		if c.ids[(s+j)%N] != id {
			return false
		}
	}
	return true
}

// InvalidUTF8Bytes counts the bytes of s that are not UTF-8.
func InvalidUTF8Bytes(s string) int64 {
	if utf8.ValidString(s) {
		return 0
	}
	var n int64
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			n++
		}
		s = s[size:]
	}
	return n
}
