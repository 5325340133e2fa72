// Package blocktext makes text of an exact token length, deterministically,
// for synth (which writes traces) and replay (which makes the text of a
// trace's virtual prompts just before sending them): the same inputs give
// the same bytes in both.
//
//   - Corpus (corpus.go) encodes a text once and cuts token-exact pieces at
//     word boundaries; DefaultCorpus is the prose prose.go generates, built
//     once per process under each embedded tokenizer.
//   - Blocks (blocks.go) turns a list of prefix-block hashes, a token count
//     and a salt into a prompt whose token prefix two prompts share exactly
//     when they share a hash prefix.
//
// In: text (or the default prose), a tokenizer, block hashes, counts and
// salts. Out: strings. Nothing here does I/O.
package blocktext
