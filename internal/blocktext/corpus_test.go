package blocktext

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

const pg1184 = "../../../shared/data/pg1184/pg1184.txt"

// checkCorpus asserts Text's contract on many offsets and lengths: exact
// count on re-encoding, determinism, and additive concatenation.
func checkCorpus(t *testing.T, c *Corpus, samples int) {
	t.Helper()
	tok := c.Tokenizer()
	r := &rng{s: 42}
	lengths := []int{1, 2, 3, 7, 50, 400, 2000}
	for i := 0; i < samples; i++ {
		off := r.intn(2 * c.Tokens())
		n := lengths[i%len(lengths)]
		switch i {
		case 0:
			n = c.Tokens() + 17 // longer than the corpus: wraps
		case 1:
			off = c.Tokens() - 3 // starts near the end: wraps
		}
		s := c.Text(off, n)
		if got := tok.Count(s); got != n {
			t.Fatalf("Text(%d, %d) re-encodes to %d tokens: %q", off, n, got, head(s))
		}
		if again := c.Text(off, n); again != s {
			t.Fatalf("Text(%d, %d) not deterministic", off, n)
		}
		if !strings.HasPrefix(s, " ") {
			t.Fatalf("Text(%d, %d) does not start with a space: %q", off, n, head(s))
		}
		if i%7 == 0 {
			m := lengths[(i/7)%len(lengths)]
			s2 := c.Text(off*31+5, m)
			if got := tok.Count(s + s2); got != n+m {
				t.Fatalf("concatenation of %d and %d tokens counts %d: %q + %q", n, m, got, tail(s), head(s2))
			}
		}
	}
	if c.Text(5, 0) != "" || c.Text(5, -3) != "" {
		t.Fatal("Text with n <= 0 is not empty")
	}
}

func head(s string) string { return s[:min(len(s), 80)] }
func tail(s string) string { return s[max(0, len(s)-80):] }

func TestDefaultCorpusExactTokens(t *testing.T) {
	for _, name := range []string{"o200k_base", "cl100k_base"} {
		t.Run(name, func(t *testing.T) {
			tok, err := tokenizer.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			c, err := DefaultCorpus(tok)
			if err != nil {
				t.Fatal(err)
			}
			if c.Tokens() < 50000 {
				t.Fatalf("default corpus has only %d tokens", c.Tokens())
			}
			checkCorpus(t, c, 400)
		})
	}
}

func TestDefaultProseDeterministic(t *testing.T) {
	a := generateProse(2000, 1)
	if a != generateProse(2000, 1) {
		t.Fatal("same seed, different prose")
	}
	if a == generateProse(2000, 2) {
		t.Fatal("different seeds, same prose")
	}
	if DefaultProse() != DefaultProse() {
		t.Fatal("default prose changes between calls")
	}
}

func TestCorpusPG1184(t *testing.T) {
	b, err := os.ReadFile(pg1184)
	if err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	// a quarter of the book keeps the race-enabled run short
	c, err := NewCorpus(string(b[:len(b)/4]), tokenizer.Default())
	if err != nil {
		t.Fatal(err)
	}
	checkCorpus(t, c, 200)
}

func TestNewCorpusRejectsUnusableText(t *testing.T) {
	for name, text := range map[string]string{
		"empty":    "",
		"short":    "Too short to be a corpus.",
		"no words": strings.Repeat("x", 5000),
	} {
		if _, err := NewCorpus(text, tokenizer.Default()); err == nil {
			t.Errorf("%s: NewCorpus accepted it", name)
		}
	}
}

// The split encoding of a long text is the whole text's encoding, on the
// default prose under both tokenizers with ASCII cuts, and on vLLM's
// multi-turn text (not under -race: too slow there).
func TestEncodeSplitEqualsWhole(t *testing.T) {
	texts := map[string]string{"default prose": DefaultProse()}
	if b, err := os.ReadFile(pg1184); err == nil && !raceOn {
		texts["pg1184"] = string(b)
	}
	for _, name := range []string{"o200k_base", "cl100k_base"} {
		tok, err := tokenizer.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		for what, text := range texts {
			if what == "pg1184" && name != tokenizer.DefaultName {
				continue // 2.7 MB: one tokenizer is enough time
			}
			if len(text) < parallelEncodeBytes {
				t.Fatalf("%s: %d bytes, below the split threshold: the test would not split", what, len(text))
			}
			want := tok.Encode(text)
			for _, procs := range []int{2, 5} {
				got, ok := splitEncode(tok, text, procs)
				if !ok {
					t.Errorf("%s under %s in %d pieces: a seam failed its check", what, name, procs)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s under %s, %d processors: split encoding differs (%d vs %d ids)", what, name, procs, len(got), len(want))
				}
			}
		}
	}
}
