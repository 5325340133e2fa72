package synth

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstdBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.EncodeAll(b, nil)
}

// traceBytes writes convs with fixed metadata and returns the file.
func traceBytes(t *testing.T, src Source, convs []Conversation) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.parquet")
	if err := Write(context.Background(), p, false, trace.TraceMeta{Source: src.Name(), Tokenizer: "o200k_base"}, convs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompressedInputs reads every source's input plain, gzipped and
// zstd-compressed, under names that do not tell (a ".csv" holding gzip, a
// ".gz" holding zstd): the traces must be byte-identical.
func TestCompressedInputs(t *testing.T) {
	tok := tokenizer.Default()
	azure := "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,879,55\n"
	sources := []struct {
		name, body string
		open       func(path string) (Source, error)
	}{
		{"azure", azure, func(p string) (Source, error) {
			return NewAzure(ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true})
		}},
		{"bailian", bailianQuirks, func(p string) (Source, error) {
			return NewBailian(ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true})
		}},
		{"burstgpt", burstNew, func(p string) (Source, error) {
			return NewBurstGPT(BurstGPTOptions{ImportOptions: ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true}})
		}},
		{"mooncake", mooncakeQuirks, func(p string) (Source, error) {
			return NewMooncake(ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, BlockSize: 32})
		}},
		{"sharegpt", quirky, func(p string) (Source, error) { return NewShareGPT(ShareGPTOptions{Path: p, Tokenizer: tok}) }},
	}
	for _, s := range sources {
		t.Run(s.name, func(t *testing.T) {
			var want []byte
			for _, v := range []struct {
				name string
				data []byte
			}{
				{"plain.txt", []byte(s.body)},
				{"in.csv", gzipBytes(t, []byte(s.body))},
				{"in.gz", zstdBytes(t, []byte(s.body))},
			} {
				p := filepath.Join(t.TempDir(), v.name)
				if err := os.WriteFile(p, v.data, 0o644); err != nil {
					t.Fatal(err)
				}
				src, err := s.open(p)
				if err != nil {
					t.Fatal(err)
				}
				convs, err := src.Conversations(context.Background())
				if err != nil {
					t.Fatalf("%s: %v", v.name, err)
				}
				got := traceBytes(t, src, convs)
				if want == nil {
					want = got
					if len(convs) == 0 {
						t.Fatal("no conversation from the plain input")
					}
				} else if !bytes.Equal(got, want) {
					t.Errorf("%s: trace differs from the plain input's", v.name)
				}
			}
		})
	}
}

// TestCompressedInputErrors: a bad row inside a compressed file is named
// by file and line as in a plain one; a truncated stream says so.
func TestCompressedInputErrors(t *testing.T) {
	body := "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,x,55\n"
	p := filepath.Join(t.TempDir(), "azure.csv.gz")
	if err := os.WriteFile(p, gzipBytes(t, []byte(body)), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := NewAzure(ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Conversations(context.Background())
	var re *RowError
	if !errors.As(err, &re) || re.File != p || re.Line != 3 {
		t.Fatalf("want a RowError at %s line 3, got %v", p, err)
	}

	// a zstd JSONL cut in half
	z := zstdBytes(t, []byte(strings.Repeat(mooncakeQuirks, 50)))
	p = filepath.Join(t.TempDir(), "m.jsonl.zst")
	if err := os.WriteFile(p, z[:len(z)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := NewMooncake(ImportOptions{Path: p, Corpus: importCorpus(t), PromptText: true, BlockSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Conversations(context.Background())
	var de *DecompressError
	if !errors.As(err, &de) || de.Codec != "zstd" || !strings.Contains(err.Error(), p) {
		t.Fatalf("want a zstd DecompressError naming %s, got %v", p, err)
	}

	// a gzipped ShareGPT array cut short
	g := gzipBytes(t, []byte(quirky))
	p = filepath.Join(t.TempDir(), "sg.json")
	if err := os.WriteFile(p, g[:len(g)-12], 0o644); err != nil {
		t.Fatal(err)
	}
	sg, err := NewShareGPT(ShareGPTOptions{Path: p, Tokenizer: tokenizer.Default()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = sg.Conversations(context.Background()); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("want an error naming %s, got %v", p, err)
	}
}

// TestCompressedCorpus: a text file read by CorpusFromFiles (and
// --text-file) may be compressed.
func TestCompressedCorpus(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)
	p := filepath.Join(t.TempDir(), "book.txt")
	if err := os.WriteFile(p, zstdBytes(t, []byte(text)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := CorpusFromFiles([]string{p}, tokenizer.Default())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewCorpus(text+"\n", tokenizer.Default())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := c.Text(7, 100), plain.Text(7, 100); a != b {
		t.Errorf("compressed corpus text %q, plain %q", a, b)
	}
}
