package tokenizer

import (
	"math"
	"reflect"
	"sync"
	"unsafe"

	tk "github.com/tiktoken-go/tokenizer"
)

// fastBPE counts and encodes o200k_base and cl100k_base text with the same
// result as the tiktoken-go codec, without its regular-expression engine
// where the text allows.
//
// The codec splits text into pieces with a regex (run by regexp2 over the
// text's runes) and byte-pair-encodes each piece against the vocabulary.
// For ASCII text the split is computed here by a scanner that follows the
// regex's alternatives in order, with its backtracking worked out (split
// below); the BPE merges are the codec's rule: repeatedly merge the
// adjacent pair whose concatenation has the lowest rank, the leftmost on a
// tie, a piece found whole in the vocabulary being one token.
//
// Text that is not all ASCII is cut at seams: a position k where byte k-1
// is an ASCII lower-case letter and byte k a space. Every match of both
// regexes that holds a lower-case ASCII letter is a word (letters and an
// optional contraction) that ends at the first byte that is neither a
// letter nor an apostrophe starting a contraction, so a match ends at
// every seam; the regex has no look-behind, and its one look-ahead sits in
// whitespace matches, which end before the letter. The pieces of text are
// therefore the pieces of its seam-delimited stretches, one after the
// other: ASCII stretches go to the scanner, the others to the codec
// (whose rune decoding of invalid UTF-8 is never cut by an ASCII seam).
type fastBPE struct {
	codec tk.Codec
	split func(s string, i int) int // the end of the piece starting at i
	ranks map[string]uint           // byte sequence -> rank (= token id)
	// shared: ranks is the codec's own table, not a copy.
	shared bool
}

// Byte classes of the ASCII range, as the codec's compiled regexes
// classify them: \p{Lu}, \p{Ll}, \p{N} and \s (the ASCII part of
// unicode.IsSpace). No ASCII byte is \p{Lt}, \p{Lm}, \p{Lo} or \p{M}.
// DEL (0x7f) is in none of the regexes' sets, negated ones included (their
// ASCII bitmaps leave it out), so no match holds it: the codec skips it
// and it has no token.
const (
	clUpper = 1 << iota
	clLower
	clDigit
	clSpace
	clNewline // \r or \n (also clSpace)
	clSkip    // DEL
)

var asciiClass = func() (t [128]uint8) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = clUpper
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = clLower
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = clDigit
	}
	for _, c := range " \t\v\f" {
		t[c] = clSpace
	}
	t['\r'], t['\n'] = clSpace|clNewline, clSpace|clNewline
	t[0x7f] = clSkip
	return t
}()

const clLetter = clUpper | clLower

// isPrefix is [^\r\n\p{L}\p{N}]: the optional byte before a word.
func isPrefix(c byte) bool { return asciiClass[c]&(clLetter|clDigit|clNewline|clSkip) == 0 }

// isOther is [^\s\p{L}\p{N}]: punctuation, symbols and control bytes.
func isOther(c byte) bool { return asciiClass[c] == 0 }

// contraction is the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i:], or 0.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && s[i+2]|0x20 == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2]|0x20 == 'l' {
			return 3
		}
	}
	return 0
}

// spaces is the end of the whitespace alternatives the regexes share, at
// the whitespace run starting at i, as the codec's compiled code runs them:
//
//	\s*[\r\n]+   when the run holds a \r or \n: \s* backtracks to the run's
//	             first one (the compiled backtracking searches forward),
//	             and [\r\n]+ takes the \r\n bytes from there;
//	\s+(?!\S)    the whole run at the end of the text, else all of it but
//	             its last byte, when that leaves one;
//	\s+          the run.
func spaces(s string, i int) int {
	w, nl := i, -1
	for w < len(s) && s[w] < 0x80 && asciiClass[s[w]]&clSpace != 0 {
		if nl < 0 && asciiClass[s[w]]&clNewline != 0 {
			nl = w
		}
		w++
	}
	switch {
	case nl >= 0:
		for nl < len(s) && s[nl] < 0x80 && asciiClass[s[nl]]&clNewline != 0 {
			nl++
		}
		return nl
	case w == len(s) || w-i < 2:
		return w
	default:
		return w - 1
	}
}

// splitO200k is the end of o200k_base's piece starting at s[i] (s ASCII):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// In ASCII upper and lower case are disjoint, so the first two
// alternatives together match an optional prefix byte, upper-case letters,
// lower-case letters (at least one letter) and a contraction; giving back
// the prefix or letters never lets a shorter path succeed.
func splitO200k(s string, i int) int {
	j := i
	if isPrefix(s[i]) {
		j++
	}
	if j < len(s) && asciiClass[s[j]]&clLetter != 0 {
		for j < len(s) && asciiClass[s[j]] == clUpper {
			j++
		}
		for j < len(s) && asciiClass[s[j]] == clLower {
			j++
		}
		return j + contraction(s, j)
	}
	return splitRest(s, i, true)
}

// splitCl100k is the end of cl100k_base's piece starting at s[i] (s
// ASCII):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCl100k(s string, i int) int {
	if n := contraction(s, i); n > 0 {
		return i + n
	}
	j := i
	if isPrefix(s[i]) {
		j++
	}
	if j < len(s) && asciiClass[s[j]]&clLetter != 0 {
		for j < len(s) && asciiClass[s[j]]&clLetter != 0 {
			j++
		}
		return j
	}
	return splitRest(s, i, false)
}

// splitRest is the alternatives after the words, the same in both
// regexes but for the slash o200k_base lets follow punctuation:
// \p{N}{1,3}, ' ?[^\s\p{L}\p{N}]+[\r\n/]*' (or [\r\n]*), then whitespace.
func splitRest(s string, i int, slash bool) int {
	c := asciiClass[s[i]]
	if c == clDigit {
		j := i + 1
		for j < len(s) && j < i+3 && asciiClass[s[j]] == clDigit {
			j++
		}
		return j
	}
	j := i
	if s[j] == ' ' {
		j++
	}
	if j < len(s) && isOther(s[j]) {
		for j < len(s) && isOther(s[j]) {
			j++
		}
		for j < len(s) && (asciiClass[s[j]]&clNewline != 0 || slash && s[j] == '/') {
			j++
		}
		return j
	}
	return spaces(s, i) // s[i] is whitespace: every other byte matched above
}

var (
	fastOnce  [2]sync.Once
	fastCodec [2]*fastBPE
)

// newFast returns the fast counter of codec c (o200k_base or cl100k_base),
// built once per process.
func newFast(name string, c tk.Codec) *fastBPE {
	k, split := 0, splitO200k
	if name == string(tk.Cl100kBase) {
		k, split = 1, splitCl100k
	}
	fastOnce[k].Do(func() {
		f := &fastBPE{codec: c, split: split, ranks: codecRanks(c)}
		f.shared = f.ranks != nil
		if !f.shared {
			f.ranks = decodeRanks(c)
		}
		fastCodec[k] = f
	})
	return fastCodec[k]
}

// codecRanks is the codec's own vocabulary (an unexported map[string]uint
// of tiktoken-go's codec.Codec), read, never written, through reflect:
// a second table of its 200k strings would cost each process several
// times the CPU of loading the codec. Nil when the codec is laid out
// otherwise (another library version); TestFastSharesVocabulary notices.
func codecRanks(c tk.Codec) map[string]uint {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("vocabulary")
	want := reflect.TypeFor[map[string]uint]()
	if !f.IsValid() || f.Kind() != reflect.Map || !f.Type().ConvertibleTo(want) {
		return nil
	}
	m, _ := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Convert(want).Interface().(map[string]uint)
	if len(m) == 0 {
		return nil
	}
	return m
}

// decodeRanks reads the vocabulary back through Decode, id by id, up to
// a run of 1,024 ids without a token past the last.
func decodeRanks(c tk.Codec) map[string]uint {
	ranks := make(map[string]uint, 1<<18)
	one := make([]uint, 1)
	for id, miss := uint(0), 0; miss < 1024; id++ {
		one[0] = id
		s, err := c.Decode(one)
		if err != nil || s == "" {
			miss++
			continue
		}
		miss = 0
		ranks[s] = id
	}
	return ranks
}

// nonASCII is the index of the first byte of s at or after i that is not
// ASCII, or len(s).
func nonASCII(s string, i int) int {
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return i
		}
	}
	return len(s)
}

// seam reports whether a match ends at k: s[k-1] a lower-case ASCII letter
// and s[k] a space.
func seam(s string, k int) bool {
	return k > 0 && k < len(s) && s[k] == ' ' && s[k-1] >= 'a' && s[k-1] <= 'z'
}

// stretches calls ascii and other for s's seam-delimited stretches in
// order, ascii for those that are all ASCII.
func stretches(s string, ascii, other func(string)) {
	pos := 0
	for pos < len(s) {
		j := nonASCII(s, pos)
		if j == len(s) {
			ascii(s[pos:])
			return
		}
		// The ASCII run before j up to its last seam, if any.
		k := j - 1
		for k > pos && !seam(s, k) {
			k--
		}
		if k > pos {
			ascii(s[pos:k])
			pos = k
		}
		// The codec's stretch: to the first seam after j.
		e := j + 1
		for e < len(s) && !seam(s, e) {
			e++
		}
		other(s[pos:e])
		pos = e
	}
}

// Count is the number of tokens of s.
func (f *fastBPE) Count(s string) int {
	if nonASCII(s, 0) == len(s) {
		return f.countASCII(s)
	}
	n := 0
	stretches(s, func(a string) { n += f.countASCII(a) }, func(o string) {
		c, _ := f.codec.Count(o)
		n += c
	})
	return n
}

func (f *fastBPE) countASCII(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == 0x7f {
			i++
			continue
		}
		e := f.split(s, i)
		if _, ok := f.ranks[s[i:e]]; ok {
			n++
		} else {
			n += f.merge(s[i:e], nil)
		}
		i = e
	}
	return n
}

// Encode is the token ids of s.
func (f *fastBPE) Encode(s string) []uint {
	var ids []uint
	stretches(s, func(a string) { ids = f.encodeASCII(ids, a) }, func(o string) {
		more, _, _ := f.codec.Encode(o)
		ids = append(ids, more...)
	})
	return ids
}

func (f *fastBPE) encodeASCII(ids []uint, s string) []uint {
	for i := 0; i < len(s); {
		if s[i] == 0x7f {
			i++
			continue
		}
		e := f.split(s, i)
		if r, ok := f.ranks[s[i:e]]; ok {
			ids = append(ids, r)
		} else {
			f.merge(s[i:e], func(r uint) { ids = append(ids, r) })
		}
		i = e
	}
	return ids
}

// noRank marks a boundary whose part cannot merge with the next.
const noRank = math.MaxUint32

// mergeStack is the piece length merge handles without allocating.
const mergeStack = 128

// merge byte-pair-encodes piece and returns its token count, calling emit
// (when not nil) with each token's rank in order. Boundaries live in a
// linked list over byte offsets; each step merges the pair of lowest rank,
// the leftmost of equal ones, found by a scan: O(n^2) for a piece of n
// bytes, where pieces longer than mergeStack go to mergeHeap's O(n log n).
func (f *fastBPE) merge(piece string, emit func(uint)) int {
	n := len(piece)
	if n > mergeStack {
		return f.mergeHeap(piece, emit)
	}
	var pos [mergeStack + 1]int32
	var rank [mergeStack + 1]uint32
	m := n + 1 // boundaries pos[0:m]
	for i := range m {
		pos[i] = int32(i)
	}
	rankAt := func(i int) uint32 { // rank of parts i and i+1 merged
		if i+2 >= m {
			return noRank
		}
		if r, ok := f.ranks[piece[pos[i]:pos[i+2]]]; ok {
			return uint32(r)
		}
		return noRank
	}
	for i := range m {
		rank[i] = rankAt(i)
	}
	for m > 1 {
		best, at := uint32(noRank), -1
		for i := range m - 1 {
			if rank[i] < best {
				best, at = rank[i], i
			}
		}
		if at < 0 {
			break
		}
		copy(pos[at+1:m-1], pos[at+2:m])
		copy(rank[at+1:m-1], rank[at+2:m])
		m--
		rank[at] = rankAt(at)
		if at > 0 {
			rank[at-1] = rankAt(at - 1)
		}
	}
	if emit != nil {
		for i := range m - 1 {
			emit(f.ranks[piece[pos[i]:pos[i+1]]])
		}
	}
	return m - 1
}

// mergeHeap is merge for long pieces: the same merges in the same order,
// the candidates in a min-heap of (rank, offset), stale ones skipped.
func (f *fastBPE) mergeHeap(piece string, emit func(uint)) int {
	n := int32(len(piece))
	next := make([]int32, n+1) // next boundary, -1 after the last
	prev := make([]int32, n+1)
	rank := make([]uint32, n+1) // rank of the part at this boundary merged with the next
	for i := range next {
		next[i], prev[i], rank[i] = int32(i)+1, int32(i)-1, noRank
	}
	next[n] = -1
	rankAt := func(i int32) uint32 {
		j := next[i]
		if j < 0 || next[j] < 0 {
			return noRank
		}
		if r, ok := f.ranks[piece[i:next[j]]]; ok {
			return uint32(r)
		}
		return noRank
	}
	h := candHeap(make([]cand, 0, n))
	for i := int32(0); i < n; i++ {
		if rank[i] = rankAt(i); rank[i] != noRank {
			h = append(h, cand{rank[i], i})
		}
	}
	h.init()
	parts := int(n)
	for len(h) > 0 {
		c := h.pop()
		if rank[c.at] != c.rank || next[c.at] < 0 {
			continue // stale: the boundary changed since it was pushed
		}
		i, j := c.at, next[c.at]
		k := next[j]
		next[i], rank[j], next[j] = k, noRank, -2 // j removed
		if k >= 0 {
			prev[k] = i
		}
		parts--
		for _, b := range [2]int32{i, prev[i]} {
			if b < 0 {
				continue
			}
			if rank[b] = rankAt(b); rank[b] != noRank {
				h.push(cand{rank[b], b})
			}
		}
	}
	if emit != nil {
		for i := int32(0); next[i] >= 0; i = next[i] {
			emit(f.ranks[piece[i:next[i]]])
		}
	}
	return parts
}

type cand struct {
	rank uint32
	at   int32
}

// candHeap is a binary min-heap ordered by rank, then offset.
type candHeap []cand

func (h candHeap) less(a, b int) bool {
	return h[a].rank < h[b].rank || h[a].rank == h[b].rank && h[a].at < h[b].at
}

func (h candHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candHeap) push(c cand) {
	*h = append(*h, c)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h candHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
