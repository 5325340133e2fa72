package synth

import (
	"slices"

	"github.com/tracekit/tracekit/internal/history"
	"github.com/tracekit/tracekit/trace"
)

// hasPrefix reports whether msgs starts with prefix.
func hasPrefix(msgs, prefix []trace.Message) bool {
	return len(prefix) <= len(msgs) && history.Shared(msgs, prefix) == len(prefix)
}

// answerMessage is the assistant message of a reference answer.
func answerMessage(t *trace.Turn, tokens int32) trace.Message {
	return trace.Message{Role: "assistant", Content: t.ReferenceAnswer, ToolCalls: t.ReferenceToolCalls, Tokens: tokens}
}

// Transcripts returns, for each turn of a conversation in Turn order, its
// transcript as replay with --history reference builds it: its history
// (the merged transcripts of its parents, history.Merge; for empty
// Parents the previous turn's, none for turn 0), its Messages and its
// reference answer. A parent index that is not an earlier turn gives no
// history.
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
	return history.Merge(ts...)
}
