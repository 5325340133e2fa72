// Package history holds the one rule for the history a graph node of a
// trace carries (trace.Turn.Parents): its parents' transcripts (each
// parent's history, messages and answer) merged in the order listed, a
// prefix of messages they share taken once. In: the parents' transcripts,
// as plain messages (Merge) or as a caller's own transcript type that
// carries more, such as replay's encoded bodies (Fold); out: the node's
// history. synth (which checks that an imported graph's inputs are what
// replay will send) and replay (which sends them) both merge with it, so
// the two cannot disagree.
package history

import (
	"iter"
	"slices"

	"github.com/tracekit/tracekit/trace"
)

// Fold merges transcripts, in the order ts yields them, into one history:
// each transcript adds the messages that follow the prefix it shares with
// the history merged so far (Shared), so two branches of one context
// ([a b c], [a b d]) merge to [a b c d]; a transcript the history already
// holds adds nothing. msgs gives the messages of a transcript (or of the
// history: both are T); add returns history h followed by t's messages
// from k on, k being below len(msgs(t)); the first transcript is added to
// the zero T with k 0. The zero T is the history of no transcript.
func Fold[T any](ts iter.Seq[T], msgs func(*T) []trace.Message, add func(h, t *T, k int) T) T {
	var h T
	for t := range ts {
		k := Shared(msgs(&h), msgs(&t))
		if k < len(msgs(&t)) {
			h = add(&h, &t, k)
		}
	}
	return h
}

// Merge is Fold over plain messages: a new slice (nil for no messages)
// that shares no memory with the transcripts.
func Merge(transcripts ...[]trace.Message) []trace.Message {
	return Fold(slices.Values(transcripts), func(t *[]trace.Message) []trace.Message { return *t },
		func(h, t *[]trace.Message, k int) []trace.Message { return append(slices.Clip(*h), (*t)[k:]...) })
}

// Shared is the number of leading messages a and b have the same (Same).
func Shared(a, b []trace.Message) int {
	n := min(len(a), len(b))
	for i := range n {
		if !Same(&a[i], &b[i]) {
			return i
		}
	}
	return n
}

// Same reports whether a and b are one message of a history: the same
// role, text, tool calls and tool call id. Token counts are not compared:
// they are a property of how a message was counted, not of the message.
func Same(a, b *trace.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && slices.Equal(a.ToolCalls, b.ToolCalls)
}
