// Package tokenizer counts, encodes and decodes tokens so that traces have
// token-exact lengths. The default is OpenAI's o200k_base BPE, embedded in a
// pure-Go package (no download at run time); Open also accepts cl100k_base
// and the path of a Hugging Face tokenizer.json (byte-level BPE) for the
// served model.
//
// In: text (or token ids to Decode). Out: token ids, counts, text.
//
// Count and Encode under o200k_base and cl100k_base give exactly the
// tiktoken-go codec's results (its compiled split regex and BPE merges,
// quirks included), but split ASCII text with a scanner of their own and
// merge against the codec's vocabulary; stretches of text holding other
// bytes, cut where a word ends before a space, go to the codec. Counting
// ASCII text allocates nothing, so the SSE parser and replay's history
// can count each event and answer as it comes.
package tokenizer
