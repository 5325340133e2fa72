package tokenizer_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tk "github.com/tiktoken-go/tokenizer"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// encodings are the embedded tiktoken encodings: tracekit's tokenizer
// beside the library's codec it must agree with.
func encodings(t testing.TB) []struct {
	name string
	tok  tokenizer.Tokenizer
	ref  tk.Codec
} {
	t.Helper()
	var out []struct {
		name string
		tok  tokenizer.Tokenizer
		ref  tk.Codec
	}
	for _, name := range []string{"o200k_base", "cl100k_base"} {
		tok, err := tokenizer.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := tk.Get(tk.Encoding(name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, struct {
			name string
			tok  tokenizer.Tokenizer
			ref  tk.Codec
		}{name, tok, ref})
	}
	return out
}

// agree fails t when tok's Count or Encode of text differs from the
// library codec's.
func agree(t testing.TB, name string, tok tokenizer.Tokenizer, ref tk.Codec, text string) bool {
	t.Helper()
	want, _, err := ref.Encode(text)
	if err != nil {
		t.Fatalf("%s: library Encode(%q): %v", name, text, err)
	}
	got := tok.Encode(text)
	if !slices.Equal(got, want) {
		t.Errorf("%s: Encode(%q) = %v, the library's %v", name, text, got, want)
		return false
	}
	if n := tok.Count(text); n != len(want) {
		t.Errorf("%s: Count(%q) = %d, the library's %d", name, text, n, len(want))
		return false
	}
	return true
}

// TestFastShortStrings compares every string of up to two ASCII bytes,
// and every three-byte string over the bytes where the regexes' branches
// meet (letters of both cases, digits, each kind of whitespace, the
// apostrophe and contraction letters, the slash, punctuation, controls)
// with non-ASCII runes mixed in, with the library.
func TestFastShortStrings(t *testing.T) {
	for _, e := range encodings(t) {
		bad := 0
		for a := range 128 {
			if !agree(t, e.name, e.tok, e.ref, string(rune(a))) {
				bad++
			}
			for b := range 128 {
				if !agree(t, e.name, e.tok, e.ref, string([]byte{byte(a), byte(b)})) {
					bad++
				}
			}
			if bad > 10 {
				t.Fatal("too many differences")
			}
		}
		alphabet := []string{"a", "s", "l", "E", "S", "L", "7", " ", "\t", "\n", "\r", "\f",
			"\x1c", "\x7f", "'", "/", ".", "é", "É", "ſ", "中", "\u00a0", "\u2028", "\xff", "٣"}
		for _, a := range alphabet {
			for _, b := range alphabet {
				for _, c := range alphabet {
					if !agree(t, e.name, e.tok, e.ref, a+b+c) {
						bad++
					}
				}
			}
			if bad > 10 {
				t.Fatal("too many differences")
			}
		}
	}
}

// TestFastSeams puts non-ASCII text before, inside and after ASCII words,
// contractions, whitespace runs and long pieces (the heap merge), at and
// beside the seams where the text is cut.
func TestFastSeams(t *testing.T) {
	texts := []string{
		"", "hello world", "Hello World's end", "I'll be there, won't I? THEY'RE here", "don’t stop", "café au lait",
		"naïve résumé of 1234567 items", "x 中文 y", "end é", "é start", "ab é cd é ef", "it'ſ", "it 'ſ", "a 'S",
		"  \n\n  leading and trailing  \n", "tabs\tand\vform\ffeeds\r\n", "url: https://example.com/a/b//c\n/",
		"emoji 😀 here 😀", "broken \xff\xfe bytes \xc3 here", "\xe4\xb8 cut rune", "abc\u00a0def ghi\u2003jkl",
		strings.Repeat("=", 300), strings.Repeat(" ", 500) + "x", strings.Repeat("ab", 200),
		strings.Repeat("The next step is to measure, then to change one thing at a time. ", 23),
		strings.Repeat("supercalifragilisticexpialidocious", 8) + " done",
	}
	for _, e := range encodings(t) {
		for _, s := range texts {
			agree(t, e.name, e.tok, e.ref, s)
		}
	}
}

// realTexts is up to limit bytes of each corpus in ../shared/data: the
// ShareGPT answers (English and Chinese), a book's paragraphs, and the
// OpenTelemetry span files whole.
func realTexts(t *testing.T, limit int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	cut := func(texts []string) []string {
		n := 0
		for i, s := range texts {
			if n += len(s); n > limit {
				return texts[:i]
			}
		}
		return texts
	}
	if p := shared(t, "sharegpt/sharegpt_v3_random_sample.json"); p != "" {
		out["sharegpt-en"] = cut(shareGPTAnswers(t, p))
	}
	if p := shared(t, "sharegpt/sharegpt_v3_long_ge20msgs.json"); p != "" {
		out["sharegpt-long"] = cut(shareGPTAnswers(t, p))
	}
	if p := shared(t, "sharegpt/sharegpt_zh_1K.jsonl"); p != "" {
		out["sharegpt-zh"] = cut(shareGPTAnswers(t, p))
	}
	if p := shared(t, "pg1184/pg1184.txt"); p != "" {
		out["pg1184"] = cut(paragraphs(t, p))
	}
	if p := shared(t, "otel_genai"); p != "" {
		files, _ := filepath.Glob(filepath.Join(p, "*.json"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out["otel"] = append(out["otel"], string(b))
		}
	}
	return out
}

// TestFastRealText compares Count and Encode with the library over real
// text, message by message (skipped without ../shared/data).
func TestFastRealText(t *testing.T) {
	limit := 64 << 10
	if testing.Short() {
		limit = 16 << 10
	}
	corpora := realTexts(t, limit)
	if len(corpora) == 0 {
		t.Skip("../shared/data not present")
	}
	for _, e := range encodings(t) {
		for name, texts := range corpora {
			bytes, tokens, bad := 0, 0, 0
			for _, s := range texts {
				bytes += len(s)
				tokens += e.tok.Count(s)
				if !agree(t, e.name+" "+name, e.tok, e.ref, s) {
					if bad++; bad > 5 {
						t.Fatalf("%s %s: too many differences", e.name, name)
					}
				}
			}
			t.Logf("%s %s: %d texts, %d bytes, %d tokens agree", e.name, name, len(texts), bytes, tokens)
		}
	}
}

// FuzzFastCount compares Count and Encode with the library on any text.
func FuzzFastCount(f *testing.F) {
	for _, s := range []string{"hello world", "it's THEY'RE", " \n\n x", "é a b", "a/b//\n", "\xff x", "123456 7"} {
		f.Add(s)
	}
	encs := encodings(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range encs {
			agree(t, e.name, e.tok, e.ref, s)
		}
	})
}

// TestFastCountAllocs: counting ASCII text allocates nothing (the SSE
// parser counts each event's text with it).
func TestFastCountAllocs(t *testing.T) {
	text := strings.Repeat("The next step is to measure, then to change one thing at a time.\n", 20) + strings.Repeat("-", 100)
	for _, e := range encodings(t) {
		if n := testing.AllocsPerRun(20, func() { e.tok.Count(text) }); n != 0 {
			t.Errorf("%s: Count allocates %.0f times per call", e.name, n)
		}
	}
}
