package synth

import (
	"sync"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

var (
	impCorpusOnce sync.Once
	impCorpus     *Corpus
	impCorpusErr  error
)

// importCorpus is the default corpus under o200k, built once per test binary.
func importCorpus(t testing.TB) *Corpus {
	t.Helper()
	impCorpusOnce.Do(func() { impCorpus, impCorpusErr = DefaultCorpus(tokenizer.Default()) })
	if impCorpusErr != nil {
		t.Fatalf("default corpus: %v", impCorpusErr)
	}
	return impCorpus
}
