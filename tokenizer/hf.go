package tokenizer

import "fmt"

// openHF loads a Hugging Face tokenizer.json (byte-level BPE).
func openHF(path string) (Tokenizer, error) {
	return nil, fmt.Errorf("loading tokenizer %s: Hugging Face tokenizer.json support is not built yet", path)
}
