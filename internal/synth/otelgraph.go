package synth

import (
	"slices"

	"github.com/tracekit/tracekit/trace"
)

// MergeHistory is the history of a graph node as the trace defines it
// (trace.Turn.Parents): the transcripts of its parents merged in the
// order listed, a prefix of messages they share taken once. Merging is
// left to right: each next transcript contributes what follows its
// longest common prefix with what is merged so far, so two branches of
// one context ([a b c], [a b d]) merge to [a b c d].
func MergeHistory(transcripts ...[]trace.Message) []trace.Message {
	var out []trace.Message
	for i, t := range transcripts {
		if i == 0 {
			out = append(out, t...)
			continue
		}
		k := commonPrefix(out, t)
		out = append(out, t[k:]...)
	}
	return out
}

// commonPrefix is the number of leading messages a and b have equal.
func commonPrefix(a, b []trace.Message) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if !SameMessage(a[i], b[i]) {
			return i
		}
	}
	return n
}

// hasPrefix reports whether msgs starts with prefix.
func hasPrefix(msgs, prefix []trace.Message) bool {
	return len(prefix) <= len(msgs) && commonPrefix(msgs, prefix) == len(prefix)
}

// SameMessage reports whether a and b are one message: same role, text,
// tool calls and tool call id (token counts are not compared).
func SameMessage(a, b trace.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && slices.Equal(a.ToolCalls, b.ToolCalls)
}

// answerMessage is the assistant message of a reference answer.
func answerMessage(t *trace.Turn, tokens int32) trace.Message {
	return trace.Message{Role: "assistant", Content: t.ReferenceAnswer, ToolCalls: t.ReferenceToolCalls, Tokens: tokens}
}

// Transcripts returns, for each turn of a conversation in Turn order, its
// transcript as replay with --history reference builds it: its history
// (the merged transcripts of its parents; for empty Parents the previous
// turn's, none for turn 0), its Messages and its reference answer. A
// parent index that is not an earlier turn gives no history.
func Transcripts(conv []trace.Turn) [][]trace.Message {
	out := make([][]trace.Message, len(conv))
	for k := range conv {
		h := HistoryOf(conv, out, k)
		t := slices.Concat(h, conv[k].Messages)
		out[k] = append(t, answerMessage(&conv[k], 0))
	}
	return out
}

// HistoryOf is turn k's history given the transcripts of the turns before
// it (done[j] for j < k).
func HistoryOf(conv []trace.Turn, done [][]trace.Message, k int) []trace.Message {
	ps := conv[k].Parents
	if len(ps) == 0 {
		if k == 0 {
			return nil
		}
		return slices.Clone(done[k-1])
	}
	var ts [][]trace.Message
	for _, p := range ps {
		if p >= 0 && int(p) < k {
			ts = append(ts, done[p])
		}
	}
	return MergeHistory(ts...)
}
