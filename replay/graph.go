package replay

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/tracekit/tracekit/trace"
)

// A conversation whose turns carry Parents (trace.Turn.Parents) is a
// dependency graph (agentic traffic) and runs here instead of closedLoop
// or openLoop. Closed loop: a node is sent when every parent finished, its
// ThinkTimeNs (scaled by --speed) after the last parent's done time
// (RootParent: after the conversation start); independent branches run
// concurrently, one goroutine per node in flight, all owned and joined by
// the conversation's goroutine; --max-concurrency slots apply as for any
// request. A node's history is its parents' transcripts (each parent's
// history, messages and answer) merged in listed order, a message prefix
// they share taken once. A node whose parent failed is not sent: it is
// recorded with trace.ErrParentFailed naming the parent, and so are its
// descendants; other branches go on. Open loop: every node at its own
// ArrivalOffsetNs with the reference transcripts of its parents.

// isGraph reports whether conv is a dependency graph: a turn names its
// parents. A chat (no Parents anywhere) runs as it always has.
func isGraph(conv []trace.Turn) bool {
	for i := range conv {
		if len(conv[i].Parents) > 0 {
			return true
		}
	}
	return false
}

// gnode is one request of a graph conversation.
type gnode struct {
	turn     *trace.Turn
	parents  []int // indices into the graph's nodes; rootIdx for the start
	children []int
	pending  int // parents not yet resolved

	// The outcome, set once by the goroutine that ran the node (or by the
	// coordinator for a node not sent) before it reports.
	state   nodeState
	reqID   string
	kind    trace.ErrorKind // the error of a failed node
	doneAt  int64           // absolute clock.Mono of the end
	transcr []trace.Message // history + messages + answer, for the children
	tokens  int32           // tokens of transcr
	// missing is a parent turn the conversation does not hold before this
	// one, noMissing if none.
	missing int32
}

type nodeState uint8

const (
	nodeWaiting nodeState = iota
	nodeOK                // answered: children may go
	nodeFailed            // error, or a parent failed: children fail with parent_failed
	nodeStopped           // not sent: the run is stopping; children are not sent either
)

// rootIdx in gnode.parents stands for the conversation start.
const rootIdx = -1

// noMissing in gnode.missing: every parent was found (RootParent, -1, is
// the smallest turn a checked trace names).
const noMissing = trace.RootParent - 1

// buildGraph resolves each turn's parents: empty Parents mean the previous
// turn of conv (none for the first), RootParent the start. A parent turn
// number the conversation lacks leaves the node failed (missing), so its
// descendants are recorded, never stalled.
func buildGraph(conv []trace.Turn) []gnode {
	nodes := make([]gnode, len(conv))
	byTurn := make(map[int32]int, len(conv))
	for i := range conv {
		byTurn[conv[i].Turn] = i
	}
	for i := range conv {
		n := &nodes[i]
		n.turn, n.missing = &conv[i], noMissing
		switch ps := conv[i].Parents; {
		case len(ps) == 0 && i == 0:
			n.parents = []int{rootIdx}
		case len(ps) == 0:
			n.parents = []int{i - 1}
		default:
			for _, p := range ps {
				j, ok := byTurn[p]
				switch {
				case p == trace.RootParent:
					n.parents = append(n.parents, rootIdx)
				case !ok || j >= i:
					n.missing = p
				default:
					n.parents = append(n.parents, j)
				}
			}
		}
		for _, p := range n.parents {
			if p != rootIdx {
				nodes[p].children = append(nodes[p].children, i)
				n.pending++
			}
		}
	}
	return nodes
}

// graphClosed runs conv closed-loop as a graph that started at the
// absolute instant start. It returns when every node was sent and
// answered, recorded as not sent, or dropped because the run is stopping.
func (r *runState) graphClosed(runCtx, stopCtx context.Context, conv []trace.Turn, start int64) {
	nodes := buildGraph(conv)
	reports := make(chan int, len(nodes)) // each node reports once: never blocks
	resolved := 0
	var ready []int
	for i := range nodes {
		if nodes[i].pending == 0 {
			ready = append(ready, i)
		}
	}
	for resolved < len(nodes) {
		for len(ready) > 0 {
			i := ready[0]
			ready = ready[1:]
			n := &nodes[i]
			if r.settleUnsent(nodes, i) {
				resolved++
				ready = r.release(nodes, i, ready)
				continue
			}
			at := start + r.scale(n.turn.ThinkTimeNs)
			if i == 0 && len(n.turn.Parents) == 0 {
				at = start // a first turn goes at the start, as in a chat
			}
			for _, p := range n.parents {
				if p != rootIdx {
					at = max(at, nodes[p].doneAt+r.scale(n.turn.ThinkTimeNs))
				}
			}
			go r.runNode(runCtx, stopCtx, nodes, i, at, reports)
		}
		if resolved == len(nodes) {
			break
		}
		i := <-reports // every launched node reports: none is left behind
		resolved++
		ready = r.release(nodes, i, ready)
	}
}

// release resolves one parent of each child of node i and appends the
// children that have nothing left to wait for.
func (r *runState) release(nodes []gnode, i int, ready []int) []int {
	for _, c := range nodes[i].children {
		if nodes[c].pending--; nodes[c].pending == 0 {
			ready = append(ready, c)
		}
	}
	return ready
}

// settleUnsent decides a ready node that must not be sent: a parent was
// stopped (the node is dropped, as a chat's later turns are) or failed
// (the node is recorded as parent_failed, no traffic). It reports whether
// it did.
func (r *runState) settleUnsent(nodes []gnode, i int) bool {
	n := &nodes[i]
	var failed *gnode
	for _, p := range n.parents {
		if p == rootIdx {
			continue
		}
		switch nodes[p].state {
		case nodeStopped:
			n.state = nodeStopped
			return true
		case nodeFailed:
			if failed == nil {
				failed = &nodes[p]
			}
		}
	}
	if r.stopped.Load() { // limits or duration: nothing new is recorded
		n.state = nodeStopped
		return true
	}
	var msg string
	switch {
	case failed != nil:
		msg = fmt.Sprintf("parent request %s failed (%s)", failed.reqID, failed.kind)
	case n.missing != noMissing:
		msg = fmt.Sprintf("parent turn %d is not in the conversation before turn %d", n.missing, n.turn.Turn)
	default:
		return false
	}
	r.recordParentFailed(n, msg)
	return true
}

// recordParentFailed records node n as not sent because of a parent:
// every stamp is the instant it was decided, nothing went on the wire.
func (r *runState) recordParentFailed(n *gnode, msg string) {
	t := n.turn
	now := r.now()
	n.state, n.kind, n.reqID = nodeFailed, trace.ErrParentFailed, requestID(t, 0)
	rec := trace.Record{
		RequestID: n.reqID, ConversationID: t.ConversationID, Turn: t.Turn, Shard: int32(r.cfg.Shard),
		IntendedNs: now, SlotNs: now, SentNs: now, DoneNs: now,
		ErrorKind: trace.ErrParentFailed, ErrorMessage: msg,
		MaxTokens: t.OutputTokens, PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1,
		NonStreaming: t.NonStreaming, Parents: t.Parents,
	}
	r.parentFailed.Add(1)
	r.sink.Submit(&rec)
}

// requestID is the id of attempt a of turn t.
func requestID(t *trace.Turn, a int) string {
	return t.ConversationID + "-" + strconv.Itoa(int(t.Turn)) + "-" + strconv.Itoa(a)
}

// runNode sends node i at the absolute instant at with its parents'
// merged transcripts as history, records it, and reports i.
func (r *runState) runNode(runCtx, stopCtx context.Context, nodes []gnode, i int, at int64, reports chan<- int) {
	n := &nodes[i]
	defer func() { reports <- i }()
	n.state = nodeStopped
	if !r.waitUntil(stopCtx, at) {
		return
	}
	hist, histTokens := mergeTranscripts(nodes, n.parents, func(p int) ([]trace.Message, int32) {
		return nodes[p].transcr, nodes[p].tokens
	})
	msgs, tokens := r.messages(n.turn)
	ex := r.exPool.Get().(*exchange)
	defer r.exPool.Put(ex)
	if !r.do(runCtx, stopCtx, ex, n.turn, hist, msgs, histTokens+tokens, at) {
		return
	}
	n.reqID, n.kind, n.doneAt = ex.rec.RequestID, ex.rec.ErrorKind, r.start+ex.rec.DoneNs
	if ex.rec.ErrorKind != trace.ErrNone {
		n.state = nodeFailed
		return
	}
	if len(n.children) > 0 {
		answer := r.answerMessage(ex, n.turn)
		n.transcr = concat(hist, msgs, answer)
		n.tokens = histTokens + tokens + answer.Tokens
	}
	n.state = nodeOK
}

// concat returns hist + msgs + answer in a slice of its own.
func concat(hist, msgs []trace.Message, answer trace.Message) []trace.Message {
	out := make([]trace.Message, 0, len(hist)+len(msgs)+1)
	return append(append(append(out, hist...), msgs...), answer)
}

// mergeTranscripts is the history of a node with the given parents: their
// transcripts in the order listed, each one's prefix shared with what is
// merged so far taken once. tr gives a parent's transcript and its tokens.
func mergeTranscripts(nodes []gnode, parents []int, tr func(p int) ([]trace.Message, int32)) ([]trace.Message, int32) {
	var out []trace.Message
	var tokens int32
	for _, p := range parents {
		if p == rootIdx {
			continue
		}
		t, tt := tr(p)
		if out == nil {
			out, tokens = t, tt // shared, not copied: callers never append in place
			continue
		}
		k := 0
		for k < len(out) && k < len(t) && sameMessage(&out[k], &t[k]) {
			k++
		}
		if k == len(t) {
			continue
		}
		merged := make([]trace.Message, 0, len(out)+len(t)-k)
		out = append(append(merged, out...), t[k:]...)
		for _, m := range t[k:] {
			tokens += m.Tokens
		}
	}
	return out[:len(out):len(out)], tokens
}

// sameMessage compares two history messages (a prefix shared by two
// branches holds the very same messages).
func sameMessage(a, b *trace.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID &&
		slices.Equal(a.ToolCalls, b.ToolCalls)
}

// answerMessage is the assistant message later requests carry for turn's
// answer in ex. With --history reference, or when the live tool calls do
// not match the trace's (ex.rec.ToolCallMismatch), it is the trace's
// (ReferenceAnswer and ReferenceToolCalls); otherwise the live text and
// tool calls, each live call keeping the recorded call's id in its place
// so the trace's tool messages (tool_call_id) still answer it.
func (r *runState) answerMessage(ex *exchange, turn *trace.Turn) trace.Message {
	ref := turn.ReferenceToolCalls
	if (r.cfg.History == HistoryReference && (turn.ReferenceAnswer != "" || len(ref) > 0)) || ex.rec.ToolCallMismatch {
		return trace.Message{Role: "assistant", Content: turn.ReferenceAnswer, ToolCalls: ref,
			Tokens: int32(r.tok.Count(turn.ReferenceAnswer)) + r.callTokens(ref)}
	}
	text, tokens := r.answer(ex, turn)
	m := trace.Message{Role: "assistant", Content: text, Tokens: tokens}
	if ex.stream.ToolCalls() > 0 {
		m.ToolCalls = ex.stream.AppendToolCalls(nil)
		for k := range min(len(m.ToolCalls), len(ref)) {
			m.ToolCalls[k].ID = ref[k].ID
		}
		if ex.rec.CompletionTokens < 0 || ex.rec.ErrorKind != "" {
			m.Tokens += r.callTokens(m.ToolCalls)
		}
	}
	return m
}

// callTokens counts tool calls' names and arguments.
func (r *Runner) callTokens(calls []trace.ToolCall) int32 {
	var n int
	for i := range calls {
		n += r.tok.Count(calls[i].Name) + r.tok.Count(calls[i].Arguments)
	}
	return int32(n)
}

// toolCallMismatch reports whether the live answer's tool calls differ
// from the trace's reference ones in count or names. A turn without any
// reference answer has nothing to differ from.
func toolCallMismatch(ex *exchange, turn *trace.Turn) bool {
	ref := turn.ReferenceToolCalls
	if len(ref) == 0 && turn.ReferenceAnswer == "" {
		return false
	}
	if ex.stream.ToolCalls() != len(ref) {
		return true
	}
	for k := range ref {
		if !ex.stream.ToolCallNameIs(k, ref[k].Name) {
			return true
		}
	}
	return false
}

// graphOpen runs conv open-loop as a graph: every node at its own arrival
// offset, whatever its parents did, with their reference transcripts
// (ReferenceAnswer and ReferenceToolCalls, a synthesized answer of
// OutputTokens tokens where the trace has neither) as history.
func (r *runState) graphOpen(runCtx, stopCtx context.Context, conv []trace.Turn) {
	nodes := buildGraph(conv)
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return int(min(max(conv[a].ArrivalOffsetNs-conv[b].ArrivalOffsetNs, -1), 1))
	})
	built := make([]bool, len(nodes))
	var transcript func(p int) ([]trace.Message, int32)
	transcript = func(p int) ([]trace.Message, int32) {
		n := &nodes[p]
		if !built[p] {
			hist, ht := mergeTranscripts(nodes, n.parents, transcript)
			msgs, tokens := r.messages(n.turn)
			t := n.turn
			answer := t.ReferenceAnswer
			if answer == "" && len(t.ReferenceToolCalls) == 0 {
				answer = fillerText(t.OutputTokens, r.cfg.Seed, fmt.Sprintf("%s/%d/answer", t.ConversationID, t.Turn))
			}
			a := trace.Message{Role: "assistant", Content: answer, ToolCalls: t.ReferenceToolCalls,
				Tokens: int32(r.tok.Count(answer)) + r.callTokens(t.ReferenceToolCalls)}
			n.transcr, n.tokens, built[p] = concat(hist, msgs, a), ht+tokens+a.Tokens, true
		}
		return n.transcr, n.tokens
	}
	done := make(chan struct{}, len(nodes))
	launched := 0
	for _, i := range order {
		n := &nodes[i]
		at := r.start + r.scale(n.turn.ArrivalOffsetNs)
		if !r.waitUntil(stopCtx, at) {
			break
		}
		hist, ht := mergeTranscripts(nodes, n.parents, transcript)
		msgs, tokens := r.messages(n.turn)
		launched++
		go func() {
			defer func() { done <- struct{}{} }()
			ex := r.exPool.Get().(*exchange)
			defer r.exPool.Put(ex)
			r.do(runCtx, stopCtx, ex, n.turn, hist, msgs, ht+tokens, at)
		}()
	}
	for range launched {
		<-done
	}
}
