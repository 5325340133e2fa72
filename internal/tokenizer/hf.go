package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/dlclark/regexp2/v2"
)

// gpt2Pattern is the pre-tokenizer regex of a ByteLevel pre-tokenizer with
// use_regex (GPT-2's).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// hfBPE is a Hugging Face byte-level BPE tokenizer (GPT-2, Llama 3,
// Qwen 2, Mistral Nemo, DeepSeek V3 style tokenizer.json).
//
// Encode: the text is split at added tokens (each becomes its own id);
// every other span is split by the pre-tokenizer regexes into words; each
// word's UTF-8 bytes are mapped to printable characters with GPT-2's
// byte-to-unicode table; the BPE model then merges adjacent symbols,
// always the pair with the lowest merge rank first, until no ranked pair
// is left, and the symbols are looked up in the vocabulary. Decode maps
// ids back to symbols and the symbols' characters back to bytes.
type hfBPE struct {
	name         string
	vocab        map[string]uint
	inverse      map[uint]string // id -> symbol (vocab) or raw text (added)
	added        map[uint]bool
	addedSorted  []string // longest first, for splitting
	addedIDs     map[string]uint
	ranks        map[[2]string]int
	splits       []*regexp2.Regexp
	prefixSpace  bool
	ignoreMerges bool

	mu    sync.Mutex
	cache map[string][]uint // word -> ids; bounded by cacheLimit
}

const hfCacheLimit = 1 << 16

var _ Tokenizer = (*hfBPE)(nil)

// byteToRune is GPT-2's reversible byte-to-unicode table: printable
// Latin-1 bytes map to themselves, the rest to U+0100 onwards.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// hfFile is the part of tokenizer.json that byte-level BPE needs.
type hfFile struct {
	AddedTokens []struct {
		ID      uint   `json:"id"`
		Content string `json:"content"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer *hfPreTok       `json:"pre_tokenizer"`
	Model        struct {
		Type         string          `json:"type"`
		Vocab        map[string]uint `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		IgnoreMerges bool            `json:"ignore_merges"`
	} `json:"model"`
}

type hfPreTok struct {
	Type           string      `json:"type"`
	AddPrefixSpace bool        `json:"add_prefix_space"`
	UseRegex       *bool       `json:"use_regex"`
	Pattern        *hfPattern  `json:"pattern"`
	Behavior       string      `json:"behavior"`
	Invert         bool        `json:"invert"`
	Pretokenizers  []*hfPreTok `json:"pretokenizers"`
}

type hfPattern struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// openHF loads a Hugging Face tokenizer.json (byte-level BPE).
func openHF(path string) (Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading tokenizer: %w", err)
	}
	t, err := parseHF(b)
	if err != nil {
		return nil, fmt.Errorf("loading tokenizer %s: %w", path, err)
	}
	t.name = path
	return t, nil
}

func parseHF(b []byte) (*hfBPE, error) {
	var f hfFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	if f.Model.Type != "BPE" && !(f.Model.Type == "" && f.Model.Vocab != nil) {
		return nil, fmt.Errorf("model type %q: only byte-level BPE is supported", f.Model.Type)
	}
	if len(f.Model.Vocab) == 0 {
		return nil, errors.New("model.vocab is empty")
	}
	if n := strings.TrimSpace(string(f.Normalizer)); n != "" && n != "null" && !strings.Contains(n, `"NFC"`) {
		return nil, fmt.Errorf("normalizer %s is not supported (byte-level BPE tokenizers have none)", n)
	}
	t := &hfBPE{
		vocab: f.Model.Vocab, inverse: make(map[uint]string, len(f.Model.Vocab)+len(f.AddedTokens)),
		added: map[uint]bool{}, addedIDs: map[string]uint{}, ranks: map[[2]string]int{},
		ignoreMerges: f.Model.IgnoreMerges, cache: map[string][]uint{},
	}
	for s, id := range f.Model.Vocab {
		t.inverse[id] = s
	}
	for _, a := range f.AddedTokens {
		if a.Content == "" {
			continue
		}
		t.added[a.ID] = true
		t.addedIDs[a.Content] = a.ID
		t.inverse[a.ID] = a.Content
		t.addedSorted = append(t.addedSorted, a.Content)
	}
	sort.Slice(t.addedSorted, func(i, j int) bool { return len(t.addedSorted[i]) > len(t.addedSorted[j]) })
	if err := t.parseMerges(f.Model.Merges); err != nil {
		return nil, err
	}
	if f.PreTokenizer == nil {
		return nil, errors.New("no pre_tokenizer: want ByteLevel, or a Sequence of Split and ByteLevel")
	}
	if err := t.addPreTok(f.PreTokenizer); err != nil {
		return nil, err
	}
	// every byte must be a symbol, or some text cannot be encoded
	for _, r := range byteToRune {
		if _, ok := t.vocab[string(r)]; !ok {
			return nil, fmt.Errorf("vocab lacks the byte symbol %q: not a byte-level BPE vocabulary", string(r))
		}
	}
	return t, nil
}

func (t *hfBPE) parseMerges(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		for i, m := range asStrings {
			a, b, ok := strings.Cut(m, " ")
			if !ok {
				return fmt.Errorf("model.merges[%d] %q: want two symbols separated by a space", i, m)
			}
			t.ranks[[2]string{a, b}] = i
		}
		return nil
	}
	var asPairs [][2]string
	if err := json.Unmarshal(raw, &asPairs); err != nil {
		return fmt.Errorf("model.merges: want [\"a b\", ...] or [[\"a\", \"b\"], ...]: %w", err)
	}
	for i, p := range asPairs {
		t.ranks[p] = i
	}
	return nil
}

func (t *hfBPE) addPreTok(p *hfPreTok) error {
	switch p.Type {
	case "Sequence":
		for _, q := range p.Pretokenizers {
			if err := t.addPreTok(q); err != nil {
				return err
			}
		}
	case "ByteLevel":
		t.prefixSpace = p.AddPrefixSpace
		if p.UseRegex == nil || *p.UseRegex {
			re, err := regexp2.Compile(gpt2Pattern, regexp2.None)
			if err != nil {
				return err
			}
			t.splits = append(t.splits, re)
		}
	case "Split":
		if p.Behavior != "Isolated" || p.Invert {
			return fmt.Errorf("Split pre-tokenizer with behavior %q invert %v: only Isolated is supported", p.Behavior, p.Invert)
		}
		if p.Pattern == nil || (p.Pattern.Regex == nil && p.Pattern.String == nil) {
			return errors.New("Split pre-tokenizer without a pattern")
		}
		expr := ""
		if p.Pattern.Regex != nil {
			expr = *p.Pattern.Regex
		} else {
			expr = regexp2.Escape(*p.Pattern.String)
		}
		re, err := regexp2.Compile(expr, regexp2.None)
		if err != nil {
			return fmt.Errorf("Split pattern %q: %w", expr, err)
		}
		t.splits = append(t.splits, re)
	case "Digits", "Punctuation":
		return fmt.Errorf("pre-tokenizer %s is not supported", p.Type)
	default:
		return fmt.Errorf("pre-tokenizer %q: only ByteLevel and Split are supported (this is not a byte-level BPE tokenizer)", p.Type)
	}
	return nil
}

func (t *hfBPE) Name() string { return t.name }

func (t *hfBPE) Count(text string) int { return len(t.Encode(text)) }

func (t *hfBPE) Encode(text string) []uint {
	if t.prefixSpace && text != "" && text[0] != ' ' {
		text = " " + text
	}
	var ids []uint
	for text != "" {
		i, tok := t.nextAdded(text)
		ids = t.encodePlain(ids, text[:i])
		if tok == "" {
			break
		}
		ids = append(ids, t.addedIDs[tok])
		text = text[i+len(tok):]
	}
	return ids
}

// nextAdded finds the earliest (then longest) added token in text.
func (t *hfBPE) nextAdded(text string) (int, string) {
	best, tok := len(text), ""
	for _, a := range t.addedSorted {
		if i := strings.Index(text, a); i >= 0 && i < best {
			best, tok = i, a
		}
	}
	return best, tok
}

// encodePlain pre-tokenizes text through every split regex in turn and
// appends the BPE ids of each word.
func (t *hfBPE) encodePlain(ids []uint, text string) []uint {
	if text == "" {
		return ids
	}
	words := []string{text}
	for _, re := range t.splits {
		var next []string
		for _, w := range words {
			next = append(next, splitIsolated(re, w)...)
		}
		words = next
	}
	for _, w := range words {
		ids = append(ids, t.word(w)...)
	}
	return ids
}

// splitIsolated returns the matches of re in s and the gaps between them,
// in order, covering s.
func splitIsolated(re *regexp2.Regexp, s string) []string {
	locs, err := re.FindAllStringIndex(s, -1)
	if err != nil || len(locs) == 0 {
		return []string{s}
	}
	out := make([]string, 0, 2*len(locs)+1)
	prev := 0
	for _, l := range locs {
		if l[0] > prev {
			out = append(out, s[prev:l[0]])
		}
		if l[1] > l[0] {
			out = append(out, s[l[0]:l[1]])
		}
		prev = l[1]
	}
	if prev < len(s) {
		out = append(out, s[prev:])
	}
	return out
}

// word runs BPE on one pre-token, with a cache.
func (t *hfBPE) word(w string) []uint {
	t.mu.Lock()
	ids, ok := t.cache[w]
	t.mu.Unlock()
	if ok {
		return ids
	}
	syms := make([]string, 0, len(w))
	var mapped strings.Builder
	for i := 0; i < len(w); i++ {
		r := string(byteToRune[w[i]])
		syms = append(syms, r)
		mapped.WriteString(r)
	}
	if id, ok := t.vocab[mapped.String()]; ok && (t.ignoreMerges || len(syms) == 1) {
		ids = []uint{id}
	} else {
		syms = t.merge(syms)
		ids = make([]uint, 0, len(syms))
		for _, s := range syms {
			if id, ok := t.vocab[s]; ok {
				ids = append(ids, id)
				continue
			}
			for _, r := range s { // unreachable for a valid vocab: fall back to bytes
				ids = append(ids, t.vocab[string(r)])
			}
		}
	}
	t.mu.Lock()
	if len(t.cache) >= hfCacheLimit {
		clear(t.cache)
	}
	t.cache[w] = ids
	t.mu.Unlock()
	return ids
}

// merge applies the lowest-ranked adjacent pair until none is ranked.
func (t *hfBPE) merge(syms []string) []string {
	for len(syms) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := t.ranks[[2]string{syms[i], syms[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		a, b := syms[at], syms[at+1]
		out := syms[:0:0]
		for i := 0; i < len(syms); i++ {
			if i+1 < len(syms) && syms[i] == a && syms[i+1] == b {
				out = append(out, a+b)
				i++
				continue
			}
			out = append(out, syms[i])
		}
		syms = out
	}
	return syms
}

func (t *hfBPE) Decode(ids []uint) string {
	var b strings.Builder
	for _, id := range ids {
		s, ok := t.inverse[id]
		if !ok {
			continue
		}
		if t.added[id] {
			b.WriteString(s)
			continue
		}
		for _, r := range s {
			if c, ok := runeToByte[r]; ok {
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}
