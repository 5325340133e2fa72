package synth

import (
	"github.com/tracekit/tracekit/internal/blocktext"
	"github.com/tracekit/tracekit/internal/tokenizer"
)

// The token-exact text generators live in internal/blocktext, shared with
// replay (which makes the text of virtual prompts); these names keep
// synth's API.

// Corpus hands out text of an exact token length (blocktext.Corpus).
type Corpus = blocktext.Corpus

// Blocks synthesizes prompts from prefix-block hashes (blocktext.Blocks).
type Blocks = blocktext.Blocks

// NewCorpus encodes text with tok (blocktext.NewCorpus).
func NewCorpus(text string, tok tokenizer.Tokenizer) (*Corpus, error) {
	return blocktext.NewCorpus(text, tok)
}

// DefaultCorpus is the default corpus under tok (blocktext.DefaultCorpus).
func DefaultCorpus(tok tokenizer.Tokenizer) (*Corpus, error) { return blocktext.DefaultCorpus(tok) }

// DefaultProse is the generated default corpus text (blocktext.DefaultProse).
func DefaultProse() string { return blocktext.DefaultProse() }

// NewBlocks prepares blocks of size tokens from c (blocktext.NewBlocks).
func NewBlocks(c *Corpus, size int) (*Blocks, error) { return blocktext.NewBlocks(c, size) }
