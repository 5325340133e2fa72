// Package synth makes traces. Each input kind is one Source (synthetic
// distributions over a text corpus, ShareGPT files, public production traces
// such as Mooncake or Azure); a Source yields conversations, an arrival
// schedule gives them start offsets when the source has none, and Write hands
// them, sorted, to trace's writer.
package synth
