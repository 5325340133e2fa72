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
		if _, err := Generate(context.Background(), Job{Source: a, Output: filepath.Join(dir, "t.parquet"), Replace: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBurstGPTImport streams a 500k-row BurstGPT-style CSV with
// 4-turn sessions into a trace (bench's 5M-row figure, a tenth).
func BenchmarkBurstGPTImport(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "b.csv")
	f, _ := os.Create(in)
	w := bufio.NewWriter(f)
	w.WriteString("Session ID,Timestamp,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for i := range 500_000 {
		block, j := i/100, i%100
		if block%5 == 4 {
			fmt.Fprintf(w, ",%d,1.5,GPT-4,%d,%d,%d,API log\n", i*2, 20+i%2000, i%600, 20+i%2000+i%600)
			continue
		}
		fmt.Fprintf(w, "%d,%d,1.5,ChatGPT,%d,%d,%d,Conversation log\n", block*25+j%25, i*2, 20+i%2000, i%600, 20+i%2000+i%600)
	}
	w.Flush()
	f.Close()
	importCorpus(b)
	b.ResetTimer()
	for range b.N {
		s := &BurstGPT{Opts: BurstGPTOptions{ImportOptions: ImportOptions{Path: in}}}
		if _, err := Generate(context.Background(), Job{Source: s, Output: filepath.Join(dir, "t.parquet"), Replace: true}); err != nil {
			b.Fatal(err)
		}
	}
}
