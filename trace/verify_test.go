package trace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/tracekit/tracekit/trace/tracetest"
)

// pageEnds returns the offset of the last byte of every page of the file
// (inside the page's body, which its CRC covers), from its offset index.
func pageEnds(t *testing.T, path string) []int64 {
	t.Helper()
	pf := tracetest.OpenParquet(t, path)
	var ends []int64
	for _, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			oi, err := cc.(*parquet.FileColumnChunk).OffsetIndex()
			if err != nil {
				t.Fatal(err)
			}
			for i := range oi.NumPages() {
				ends = append(ends, oi.Offset(i)+oi.CompressedPageSize(i)-1)
			}
		}
	}
	return ends
}

// Flipping any byte of any page of a trace is found by VerifyPages, which
// names where; the intact file passes.
func TestVerifyPagesFindsFlippedBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.parquet")
	if err := WriteTrace(path, TraceMeta{Tokenizer: "o200k_base"}, sampleTurns(RowGroupRows+100)); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.VerifyPages(); err != nil {
		t.Fatalf("intact trace: %v", err)
	}
	tr.Close()
	good, _ := os.ReadFile(path)
	ends := pageEnds(t, path)
	if len(ends) < 20 {
		t.Fatalf("only %d pages", len(ends))
	}
	bad := filepath.Join(dir, "bad.parquet")
	for _, at := range ends {
		b := append([]byte(nil), good...)
		b[at] ^= 0x5a
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		tr, err := OpenTrace(bad)
		if err != nil {
			t.Fatalf("byte %d: open: %v", at, err)
		}
		err = tr.VerifyPages()
		tr.Close()
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: VerifyPages says %v", at, err)
		}
	}
}
