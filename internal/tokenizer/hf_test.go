package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/synth"
	"github.com/tracekit/tracekit/internal/tokenizer"
)

// gpt2Bytes is GPT-2's byte-to-unicode table, written out independently
// of the package's.
func gpt2Bytes() []string {
	var out []string
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			out = append(out, string(rune(b)))
		} else {
			out = append(out, string(rune(256+n)))
			n++
		}
	}
	return out
}

// tinyTokenizer writes a byte-level BPE tokenizer.json with the 256 byte
// symbols, a few merges and one added token; preTok is the pre_tokenizer.
func tinyTokenizer(t *testing.T, preTok any, mergesAsPairs bool) (string, map[string]uint) {
	t.Helper()
	vocab := map[string]uint{}
	for i, s := range gpt2Bytes() {
		vocab[s] = uint(i)
	}
	merges := [][2]string{{"h", "e"}, {"Ġ", "t"}, {"Ġt", "he"}, {"t", "he"}, {"Ġ", "a"}, {"i", "n"}, {"Ġ", "in"}}
	next := uint(256)
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = next
			next++
		}
	}
	var mergeJSON any = merges
	if !mergesAsPairs {
		var s []string
		for _, m := range merges {
			s = append(s, m[0]+" "+m[1])
		}
		mergeJSON = s
	}
	doc := map[string]any{
		"version":       "1.0",
		"added_tokens":  []map[string]any{{"id": 1000, "content": "<|eot|>", "special": true}},
		"normalizer":    nil,
		"pre_tokenizer": preTok,
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": mergeJSON},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, vocab
}

var byteLevel = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}

// llama3Split is the Split + ByteLevel sequence Llama 3 and Qwen 2 use.
var llama3Split = map[string]any{"type": "Sequence", "pretokenizers": []any{
	map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, "behavior": "Isolated", "invert": false},
	map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
}}

func TestHFByteLevelBPE(t *testing.T) {
	for name, c := range map[string]struct {
		pre   any
		pairs bool
	}{"gpt2": {byteLevel, false}, "llama3-split": {llama3Split, true}} {
		t.Run(name, func(t *testing.T) {
			path, vocab := tinyTokenizer(t, c.pre, c.pairs)
			tok, err := tokenizer.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if tok.Name() != path {
				t.Fatalf("name %q", tok.Name())
			}
			// merges by rank: "the" -> t+he -> the; " the" -> Ġt + he -> Ġthe
			got := tok.Encode("the the in")
			want := []uint{vocab["the"], vocab["Ġthe"], vocab["Ġin"]}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Encode(\"the the in\") = %v, want %v", got, want)
			}
			// an added token splits the text and keeps its id
			got = tok.Encode("hi<|eot|>the")
			want = []uint{vocab["h"], vocab["i"], 1000, vocab["the"]}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Encode with added token = %v, want %v", got, want)
			}
			for _, s := range []string{"", "héllo wörld 😀\n\n  tabs\tand  spaces ", "the<|eot|>in the end", "1234567 it's"} {
				ids := tok.Encode(s)
				if back := tok.Decode(ids); back != s {
					t.Fatalf("Decode(Encode(%q)) = %q", s, back)
				}
				if tok.Count(s) != len(ids) {
					t.Fatalf("Count(%q) = %d, Encode gives %d", s, tok.Count(s), len(ids))
				}
			}
			// a corpus under this tokenizer still cuts token-exact text
			corpus, err := synth.NewCorpus(synth.DefaultProse()[:20000], tok)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				n := 1 + (i*37)%300
				if s := corpus.Text(i*101, n); tok.Count(s) != n {
					t.Fatalf("corpus Text(%d, %d) counts %d", i*101, n, tok.Count(s))
				}
			}
		})
	}
}

func TestHFRejectsOtherTokenizers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]string{
		filepath.Join(dir, "absent.json"):                                              "no such file",
		write("garbage.json", "{nope"):                                                 "not a tokenizer.json",
		write("wordpiece.json", `{"model": {"type": "WordPiece", "vocab": {"a": 1}}}`): "only byte-level BPE",
		write("metaspace.json", `{"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE", "vocab": {"a": 1}, "merges": []}}`):                                              "Metaspace",
		write("nobytes.json", `{"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 1}, "merges": []}}`):                                                "byte symbol",
		write("badsplit.json", `{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "x"}, "behavior": "Removed"}, "model": {"type": "BPE", "vocab": {"a": 1}, "merges": []}}`): "Isolated",
	}
	for path, want := range cases {
		_, err := tokenizer.Open(path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Errorf("%s: error %v, want one naming the file and %q", filepath.Base(path), err, want)
		}
	}
}
