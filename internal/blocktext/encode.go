package blocktext

import (
	"runtime"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// asciiCutsTokenizer reports whether tok is one under which " letter"
// after an ASCII non-space always starts a pre-token (Corpus.asciiCuts).
func asciiCutsTokenizer(tok tokenizer.Tokenizer) bool {
	return tok.Name() == tokenizer.DefaultName || tok.Name() == "cl100k_base"
}

// parallelEncodeBytes is the text length from which encode splits the
// work: below it one encode is cheaper than the goroutines.
const parallelEncodeBytes = 256 << 10

// encode is tok.Encode(text), split over the processors for a long text
// under a tokenizer with ASCII cuts. The text is cut only before a
// " letter" that follows an ASCII non-space: such a position starts a
// pre-token (Corpus.asciiCuts), and BPE never merges across pre-tokens,
// so the pieces encode to the ids the whole text has and their
// concatenation is tok.Encode(text). Each seam is checked anyway (a
// window of text around it re-encodes to the ids on either side); a
// failed check falls back to one encode of the whole text.
func encode(tok tokenizer.Tokenizer, text string) []uint {
	n := min(runtime.GOMAXPROCS(0), 8)
	if n < 2 || len(text) < parallelEncodeBytes || !asciiCutsTokenizer(tok) {
		return tok.Encode(text)
	}
	if ids, ok := splitEncode(tok, text, n); ok {
		return ids
	}
	return tok.Encode(text)
}

// splitEncode encodes text in n pieces at once; false if a seam failed
// its check.
func splitEncode(tok tokenizer.Tokenizer, text string, n int) ([]uint, bool) {
	cuts := []int{0}
	for k := 1; k < n; k++ {
		if c := asciiCutAfter(text, k*len(text)/n); c > cuts[len(cuts)-1] && c < len(text) {
			cuts = append(cuts, c)
		}
	}
	cuts = append(cuts, len(text))
	parts := make([][]uint, len(cuts)-1)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() { parts[i] = tok.Encode(text[cuts[i]:cuts[i+1]]) })
	}
	wg.Wait()
	for i := 1; i < len(parts); i++ {
		if !seamHolds(tok, text, cuts[i], parts[i-1], parts[i]) {
			return nil, false
		}
	}
	return slices.Concat(parts...), len(parts) == n
}

// asciiCutAfter is the first position at or after at (len(text) if none)
// holding " letter" after an ASCII non-space.
func asciiCutAfter(text string, at int) int {
	for i := max(at, 1); i+1 < len(text); i++ {
		if text[i] == ' ' && isLetter(text, i+1) && text[i-1] < utf8.RuneSelf && !isSpace(text[i-1]) {
			return i
		}
	}
	return len(text)
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// seamHolds reports whether the text around cut, up to seamTokens tokens
// of the pieces on either side, re-encodes to those tokens.
func seamHolds(tok tokenizer.Tokenizer, text string, cut int, left, right []uint) bool {
	const seamTokens = 8
	l := left[max(0, len(left)-seamTokens):]
	r := right[:min(len(right), seamTokens)]
	lb, rb := len(tok.Decode(l)), len(tok.Decode(r))
	if cut-lb < 0 || cut+rb > len(text) {
		return false
	}
	got := tok.Encode(text[cut-lb : cut+rb])
	return slices.Equal(got, slices.Concat(l, r))
}
