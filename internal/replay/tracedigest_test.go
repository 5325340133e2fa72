package replay

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The digest is the file's SHA-256 and size; a file rewritten since it
// was hashed is hashed again.
func TestDigestTrace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.parquet")
	one := bytes.Repeat([]byte("a"), 1000)
	if err := os.WriteFile(p, one, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := digestTrace(p)
	want := sha256.Sum256(one)
	if err != nil || !bytes.Equal(d.sum, want[:]) || d.size != 1000 {
		t.Fatalf("digest %x size %d err %v, want %x 1000", d.sum, d.size, err, want)
	}
	two := bytes.Repeat([]byte("b"), 1001)
	if err := os.WriteFile(p, two, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)) // a new mtime even on a coarse clock
	d, err = digestTrace(p)
	want = sha256.Sum256(two)
	if err != nil || !bytes.Equal(d.sum, want[:]) || d.size != 1001 {
		t.Fatalf("after a rewrite: digest %x size %d err %v, want %x 1001", d.sum, d.size, err, want)
	}
	if _, err := digestTrace(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("no error for a missing trace")
	}
}

// BenchmarkDigestTrace100MB is the cost of hashing a 100 MB trace once
// before a run's clock starts, the file in the page cache (the cache of
// digests is cleared each time).
func BenchmarkDigestTrace100MB(b *testing.B) {
	p := filepath.Join(b.TempDir(), "big.parquet")
	buf := make([]byte, 100<<20)
	rand.Read(buf)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		digests.Lock()
		digests.byPath = nil
		digests.Unlock()
		if _, err := digestTrace(p); err != nil {
			b.Fatal(err)
		}
	}
}
