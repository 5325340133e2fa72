package synth

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAzureImport streams a 200k-row Azure-style CSV into a trace
// (the per-row cost of bench's 2M-row figure).
func BenchmarkAzureImport(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "a.csv")
	f, _ := os.Create(in)
	w := bufio.NewWriter(f)
	w.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
	t0 := time.Date(2024, 5, 10, 0, 0, 0, 0, time.UTC)
	for i := range 200_000 {
		fmt.Fprintf(w, "%s,%d,%d\r\n", t0.Add(time.Duration(i)*300*time.Millisecond).Format("2006-01-02 15:04:05.0000000"), 50+i%4000, 1+i%800)
	}
	w.Flush()
	f.Close()
	importCorpus(b)
	b.ResetTimer()
	for range b.N {
		a := &Azure{Opts: ImportOptions{Path: in}}
		if _, err := Generate(context.Background(), Job{Source: a, Output: filepath.Join(dir, "t.parquet")}); err != nil {
			b.Fatal(err)
		}
	}
}
