package tokenizer

import (
	"fmt"

	tk "github.com/tiktoken-go/tokenizer"
)

// Tokenizer turns text into token ids and back.
type Tokenizer interface {
	// Name identifies the tokenizer in file metadata ("o200k_base", or the
	// tokenizer.json path).
	Name() string
	Encode(text string) []uint
	Decode(ids []uint) string
	Count(text string) int
}

// DefaultName is the tokenizer used when none is given.
const DefaultName = "o200k_base"

// tiktoken adapts an embedded tiktoken codec; Count and Encode go through
// fast (the codec's results, most text without its regex engine).
type tiktoken struct {
	name  string
	codec tk.Codec
	fast  *fastBPE
}

var _ Tokenizer = tiktoken{}

func (t tiktoken) Name() string { return t.name }

func (t tiktoken) Encode(text string) []uint { return t.fast.Encode(text) }

func (t tiktoken) Decode(ids []uint) string {
	s, _ := t.codec.Decode(ids)
	return s
}

func (t tiktoken) Count(text string) int { return t.fast.Count(text) }

// Default returns the o200k_base tokenizer.
func Default() Tokenizer {
	t, err := Open(DefaultName)
	if err != nil {
		panic("tokenizer: embedded o200k_base unavailable: " + err.Error())
	}
	return t
}

// Open returns the tokenizer named by spec: "o200k_base", "cl100k_base", or
// the path of a Hugging Face tokenizer.json.
func Open(spec string) (Tokenizer, error) {
	switch spec {
	case "", DefaultName, string(tk.Cl100kBase):
		if spec == "" {
			spec = DefaultName
		}
		c, err := tk.Get(tk.Encoding(spec))
		if err != nil {
			return nil, fmt.Errorf("loading tokenizer %s: %w", spec, err)
		}
		return tiktoken{name: spec, codec: c, fast: newFast(spec, c)}, nil
	}
	return openHF(spec)
}
