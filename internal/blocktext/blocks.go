package blocktext

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// Blocks synthesizes prompts from prefix-block hashes (Mooncake's 512-token
// and Bailian's 16-token hash_ids) so that two prompts sharing a hash prefix
// share exactly that token prefix, and a server's prefix cache sees the reuse
// production saw.
//
// It works on a stream of words taken from a corpus: each word is " word"
// (one space, ASCII letters) and encodes to exactly one token. Pre-tokenizers
// of the GPT family split before every " letter" that follows a non-space,
// so any run of such words encodes to exactly one token per word, with no
// merge across a word (NewBlocks checks this on the stream and refuses a
// tokenizer that breaks it). Hence:
//
//	block(h, r) = the first r words of [tag(h)..., stream[off(h)], stream[off(h)+1], ...]
//	prompt      = block(h0, B) + block(h1, B) + ... + block(hk, n - k*B)
//
// is exactly n tokens, and its token ids are the concatenation of the
// blocks' ids. tag(h) is h written in base V with the V distinct words as
// digits (tagWords of them): two hashes below V^tagWords differ in their
// first tokens, so distinct blocks never collide; off(h) = mix(h) mod W
// places the rest of the block in the W-word stream.
//
// Prefix reuse is exact up to the tag's digits: two prompts whose hash
// lists share exactly k leading blocks share k*B tokens plus e, where e is
// the number of leading tag digits (least significant first: h mod V, h/V
// mod V, ...) their (k+1)-th hashes have in common. e is 0 unless those
// hashes are congruent mod V (for unrelated ids, about one pair in V), and
// e < tagWords for hashes below V^tagWords; no shorter spelling can do
// better, since V words cannot give more than V distinct first tokens.
// Block r-token prefixes
// are prefixes of the full block, so a request whose last block was clamped
// still shares its tokens with one holding the whole block. Blocks for which
// a request has no hash (beyond its hash list, or in a source without
// hashes) use a filler hash derived from a per-request salt: private text.
type Blocks struct {
	size   int
	stream string  // the words, concatenated
	at     []int32 // byte offset of word i in stream; len = words+1
	digits []string
}

// tagWords is how many leading words of a block spell its hash.
const tagWords = 4

// maxStreamWords bounds the word stream taken from a corpus.
const maxStreamWords = 1 << 20

// NewBlocks prepares blocks of size tokens from the words of c, under c's
// tokenizer.
func NewBlocks(c *Corpus, size int) (*Blocks, error) {
	if size <= 0 {
		return nil, fmt.Errorf("block size %d must be positive", size)
	}
	tok := c.Tokenizer()
	text := c.Text(0, c.Tokens())
	one := map[string]uint{} // word -> its single token id
	var words []string
	var ids []uint
	for i := 0; i < len(text) && len(words) < maxStreamWords; i++ {
		if text[i] != ' ' || !isLetter(text, i+1) {
			continue
		}
		j := i + 1
		for isLetter(text, j) {
			j++
		}
		if j < len(text) && text[j] >= '0' && text[j] <= '9' {
			i = j - 1
			continue
		}
		w := text[i:j]
		i = j - 1
		id, seen := one[w]
		if !seen {
			enc := tok.Encode(w)
			if len(enc) != 1 || tok.Decode(enc) != w {
				one[w] = ^uint(0)
				continue
			}
			id = enc[0]
			one[w] = id
		}
		if id == ^uint(0) {
			continue
		}
		words = append(words, w)
		ids = append(ids, id)
	}
	b := &Blocks{size: size}
	for w, id := range one {
		if id != ^uint(0) {
			b.digits = append(b.digits, w)
		}
	}
	if len(b.digits) < 16 || len(words) < 1024 {
		return nil, fmt.Errorf("corpus under %s has %d single-token words (%d distinct), need 1024 (16 distinct)", tok.Name(), len(words), len(b.digits))
	}
	sort.Strings(b.digits) // map order is random; the tag alphabet must not be
	b.at = make([]int32, len(words)+1)
	var sb strings.Builder
	for i, w := range words {
		b.at[i] = int32(sb.Len())
		sb.WriteString(w)
	}
	b.at[len(words)] = int32(sb.Len())
	b.stream = sb.String()
	if err := checkWordRun(tok, words, ids); err != nil {
		return nil, err
	}
	return b, nil
}

func isLetter(s string, i int) bool {
	return i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z')
}

// checkWordRun verifies on a sample of the stream (its start, and its end
// wrapped onto its start) that a run of words encodes to one token per word.
func checkWordRun(tok tokenizer.Tokenizer, words []string, ids []uint) error {
	const sample = 2048
	n := min(sample, len(words))
	idx := make([]int, 0, 2*n)
	for i := range n {
		idx = append(idx, i)
	}
	for i := len(words) - n/2; i < len(words); i++ {
		idx = append(idx, i)
	}
	for i := range n / 2 {
		idx = append(idx, i)
	}
	var sb strings.Builder
	for _, i := range idx {
		sb.WriteString(words[i])
	}
	got := tok.Encode(sb.String())
	if len(got) != len(idx) {
		return fmt.Errorf("tokenizer %s merges across words (%d tokens for %d words): prefix blocks cannot be token-exact", tok.Name(), len(got), len(idx))
	}
	for k, i := range idx {
		if got[k] != ids[i] {
			return fmt.Errorf("tokenizer %s encodes word %d (%q) differently inside a run: prefix blocks cannot be token-exact", tok.Name(), k, words[i])
		}
	}
	return nil
}

// BytesPerToken is the mean length in bytes of the words (tokens) blocks
// are made of.
func (b *Blocks) BytesPerToken() float64 { return float64(len(b.stream)) / float64(len(b.at)-1) }

// TagBase is V, the number of distinct words the hash tags are spelled
// with (the base of their digits).
func (b *Blocks) TagBase() int { return len(b.digits) }

// Size is the block size in tokens.
func (b *Blocks) Size() int { return b.size }

// Text returns a prompt of exactly n tokens: block hashes[j] for block j,
// the last one cut to what is left of n, and filler blocks derived from
// salt past the end of hashes.
func (b *Blocks) Text(hashes []int64, n int, salt int64) string {
	if n <= 0 {
		return ""
	}
	var sb strings.Builder
	sb.Grow(n * (len(b.stream)/(len(b.at)-1) + 1))
	for j := 0; n > 0; j++ {
		r := min(b.size, n)
		h := fillerHash(salt, j)
		if j < len(hashes) {
			h = hashes[j]
		}
		b.appendBlock(&sb, h, r)
		n -= r
	}
	return sb.String()
}

// appendBlock writes the first r tokens of block h.
func (b *Blocks) appendBlock(sb *strings.Builder, h int64, r int) {
	v := uint64(h)
	base := uint64(len(b.digits))
	for k := 0; k < tagWords && r > 0; k++ {
		sb.WriteString(b.digits[v%base])
		v /= base
		r--
	}
	W := len(b.at) - 1
	s := int(mix64(uint64(h)) % uint64(W))
	for r > 0 {
		k := min(r, W-s)
		sb.WriteString(b.stream[b.at[s]:b.at[s+k]])
		r -= k
		s = 0
	}
}

// fillerHash is the hash of block j of a request without a recorded hash
// for it: negative, so it never meets a source's (non-negative) hash ids.
func fillerHash(salt int64, j int) int64 {
	return -1 - int64(mix64(uint64(salt)<<24^uint64(j))>>1)
}

// mix64 is the splitmix64 finalizer: a bijection spreading nearby inputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
