package replay

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/history"
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
// descendants; other branches go on.
//
// Wait-only edges (trace.Turn.After) add turns a node waits for without
// taking their transcripts: in closed loop it is sent ThinkTimeNs after
// the latest done time of its parents and its After turns. A failed After
// turn does not fail the node: its history does not hold the failed
// answer, and an agent framework hands a step waiting on a failed call
// the error and goes on; the node is sent once the failed turn is done
// (a turn recorded parent_failed is done when that was decided). An After
// turn stopped by the end of the run stops the node, as a parent does; one
// the conversation does not hold is not waited for.
//
// Open loop: every node at its own ArrivalOffsetNs with the reference
// transcripts of its parents (After edges need nothing there: the arrival
// offsets already hold the waits).

// isGraph reports whether conv is a dependency graph: a turn names its
// parents or turns it waits for. A chat (neither anywhere) runs as it
// always has.
func isGraph(conv []trace.Turn) bool {
	for i := range conv {
		if len(conv[i].Parents) > 0 || len(conv[i].After) > 0 {
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
	waits    []int // After turns found: indices into the graph's nodes
	waiters  []int // the nodes whose waits hold this one
	pending  int   // parents and waits not yet resolved

	// The outcome, set once by the goroutine that ran the node (or by the
	// coordinator for a node not sent) before it reports.
	state  nodeState
	reqID  string
	kind   trace.ErrorKind // the error of a failed node
	doneAt int64           // absolute clock.Mono of the end
	tr     transcript      // history + messages + answer, for the children
	// unmerged counts the children that have not taken tr into their
	// history yet (closed loop): at 0 tr is released.
	unmerged int
	// missing is a parent turn the conversation does not hold before this
	// one, noMissing if none.
	missing int32
	// agent is the turn that started this node's agent context: the node
	// itself when it starts from the conversation start (turn 0, or a
	// sub-agent with a context of its own), else its first parent's.
	agent int32
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
		if n.agent = conv[i].Turn; len(n.parents) > 0 && n.parents[0] != rootIdx {
			n.agent = nodes[n.parents[0]].agent
		}
		for _, p := range n.parents {
			if p != rootIdx {
				nodes[p].children = append(nodes[p].children, i)
				nodes[p].unmerged++
				n.pending++
			}
		}
		for _, a := range conv[i].After {
			if j, ok := byTurn[a]; ok && j < i { // a turn it lacks is not waited for
				n.waits = append(n.waits, j)
				nodes[j].waiters = append(nodes[j].waiters, i)
				n.pending++
			}
		}
	}
	return nodes
}

// transcript is a node's history, messages and answer: the messages (to
// find the prefix two parents share), their encoding for a body (each
// message encoded once, copied after), and their tokens.
type transcript struct {
	msgs   []trace.Message
	enc    encMsgs
	tokens int32
}

// add appends m to t.
func (t *transcript) add(o *bodyOptions, m *trace.Message) {
	t.msgs = append(t.msgs, *m)
	t.enc.add(o, m)
}

// clone is a copy of t with room for grow more bytes and more messages.
func (t *transcript) clone(grow, growMsgs int) transcript {
	return transcript{msgs: append(make([]trace.Message, 0, len(t.msgs)+growMsgs), t.msgs...),
		enc: t.enc.clone(grow, growMsgs), tokens: t.tokens}
}

// graphClosed runs conv closed-loop as a graph that started at the
// absolute instant start. It returns when every node was sent and
// answered, recorded as not sent, or dropped because the run is stopping.
func (r *runState) graphClosed(runCtx, stopCtx context.Context, conv []trace.Turn, start int64, onTime bool) {
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
			if r.settleUnsent(stopCtx, nodes, i) {
				resolved++
				ready = r.release(nodes, i, ready)
				continue
			}
			at := start + r.scale(n.turn.ThinkTimeNs)
			first := i == 0 && len(n.turn.Parents) == 0
			if first {
				at = start // a first turn goes at the start, as in a chat
			}
			for _, p := range n.parents {
				if p != rootIdx {
					at = max(at, nodes[p].doneAt+r.scale(n.turn.ThinkTimeNs))
				}
			}
			for _, w := range n.waits { // done, failed or not sent: each has its done time
				at = max(at, nodes[w].doneAt+r.scale(n.turn.ThinkTimeNs))
			}
			ex, input := r.prepareNode(nodes, i)
			go r.runNode(runCtx, stopCtx, nodes, i, at, first && onTime, ex, input, reports)
		}
		if resolved == len(nodes) {
			break
		}
		i := <-reports // every launched node reports: none is left behind
		resolved++
		ready = r.release(nodes, i, ready)
	}
}

// release resolves one parent or wait of each child and waiter of node i
// and appends those that have nothing left to wait for.
func (r *runState) release(nodes []gnode, i int, ready []int) []int {
	for _, c := range nodes[i].children {
		if nodes[c].pending--; nodes[c].pending == 0 {
			ready = append(ready, c)
		}
	}
	for _, c := range nodes[i].waiters {
		if nodes[c].pending--; nodes[c].pending == 0 {
			ready = append(ready, c)
		}
	}
	return ready
}

// settleUnsent decides a ready node that must not be sent: a parent was
// stopped (the node is dropped, as a chat's later turns are) or failed
// (the node is recorded as parent_failed, no traffic). A stopped After
// turn drops it too; a failed one does not (see the top of this file). It
// reports whether it did.
func (r *runState) settleUnsent(stopCtx context.Context, nodes []gnode, i int) bool {
	n := &nodes[i]
	for _, w := range n.waits {
		if nodes[w].state == nodeStopped {
			n.state = nodeStopped
			return true
		}
	}
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
	if r.stopped.Load() || stopCtx.Err() != nil { // limits, duration, a signal: nothing new is recorded
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
	n.state, n.kind, n.reqID, n.doneAt = nodeFailed, trace.ErrParentFailed, requestID(t, 0), r.start+now
	rec := trace.Record{
		RequestID: n.reqID, ConversationID: t.ConversationID, Turn: t.Turn, Shard: int32(r.cfg.Shard),
		IntendedNs: now, SlotNs: now, SentNs: now, DoneNs: now,
		ErrorKind: trace.ErrParentFailed, ErrorMessage: msg,
		MaxTokens: t.OutputTokens, PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1,
		NonStreaming: t.NonStreaming, Parents: t.Parents, After: t.After,
		Endpoint: string(r.endpointOf(t)), ReasoningTokens: -1,
	}
	r.parentFailed.Add(1)
	r.sink.Submit(&rec)
}

// requestID is the id of attempt a of turn t.
func requestID(t *trace.Turn, a int) string {
	return t.ConversationID + "-" + strconv.Itoa(int(t.Turn)) + "-" + strconv.Itoa(a)
}

// prepareNode builds node i's transcript so far (its parents' merged,
// then its messages) and its request body in an exchange of its own, on
// the graph's goroutine as soon as the node is ready: its think time
// passes with the body built. A parent's transcript is released when its
// last child took it; a node that is its single parent's only child takes
// the parent's transcript over and extends it in place, so a chain of
// nodes encodes and copies each message once, as a chat does.
func (r *runState) prepareNode(nodes []gnode, i int) (*exchange, int32) {
	n := &nodes[i]
	msgs, tokens := r.messages(n.turn)
	var tr transcript
	if p := n.parents[0]; len(n.parents) == 1 && p != rootIdx && len(nodes[p].children) == 1 {
		tr, nodes[p].tr = nodes[p].tr, transcript{}
	} else {
		hist := mergeTranscripts(&r.bo, n.parents, func(p int) *transcript { return &nodes[p].tr })
		tr = hist.clone(0, len(msgs)+1)
	}
	for _, p := range n.parents {
		if p != rootIdx {
			if nodes[p].unmerged--; nodes[p].unmerged == 0 {
				nodes[p].tr = transcript{}
			}
		}
	}
	input := tr.tokens + tokens
	for k := range msgs {
		tr.add(&r.bo, &msgs[k])
	}
	tr.tokens = input
	n.tr = tr
	ex := r.exPool.Get().(*exchange)
	ex.media = mediaOf(tr.msgs)
	if ep := r.endpointOf(n.turn); !r.encodedHere(ep) {
		ex.body = r.appendAPIBody(ex.body[:0], ep, r.model(n.turn), n.turn, tr.msgs, nil, "")
	} else {
		ex.body = r.bo.appendBodyEnc(ex.body[:0], r.model(n.turn), tr.enc.b, n.turn)
	}
	return ex, input
}

// runNode sends node i, prepared in ex (prepareNode), at the absolute
// instant at (arrival: the session's start, see waitUntil), records it,
// and reports i. ex goes back to the pool.
func (r *runState) runNode(runCtx, stopCtx context.Context, nodes []gnode, i int, at int64, arrival bool, ex *exchange, input int32, reports chan<- int) {
	n := &nodes[i]
	defer func() { reports <- i }()
	defer r.exPool.Put(ex)
	defer func() {
		if n.state != nodeOK || len(n.children) == 0 {
			n.tr = transcript{} // no child will take it
		}
	}()
	n.state = nodeStopped
	if !r.waitUntil(stopCtx, at, arrival) {
		return
	}
	ex.agent = n.agent
	if !r.do(runCtx, stopCtx, ex, n.turn, ex.body, input, at) {
		return
	}
	n.reqID, n.kind, n.doneAt = ex.rec.RequestID, ex.rec.ErrorKind, r.start+ex.rec.DoneNs
	if ex.rec.ErrorKind != trace.ErrNone {
		n.state = nodeFailed
		return
	}
	if len(n.children) > 0 {
		answer := r.answerMessage(ex, n.turn)
		n.tr.add(&r.bo, &answer)
		n.tr.tokens += answer.Tokens
	}
	n.state = nodeOK
}

// mergeTranscripts is the history of a node with the given parents, by
// the trace's rule (history.Fold): their transcripts in the order listed,
// each one's prefix shared with what is merged so far taken once (its
// encoding copied, not encoded again). tr gives a parent's transcript.
// The result may share the first parent's transcript: callers extend a
// clone.
func mergeTranscripts(o *bodyOptions, parents []int, tr func(p int) *transcript) transcript {
	ts := func(yield func(transcript) bool) {
		for _, p := range parents {
			if p != rootIdx && !yield(*tr(p)) {
				return
			}
		}
	}
	out := history.Fold(ts, func(t *transcript) []trace.Message { return t.msgs },
		func(h, t *transcript, k int) transcript {
			if len(h.msgs) == 0 {
				return *t // shared, not copied: callers never append in place
			}
			merged := h.clone(len(t.enc.from(k))+len(o.sep()), len(t.msgs)-k)
			merged.msgs = append(merged.msgs, t.msgs[k:]...)
			merged.enc.extend(o, &t.enc, k)
			for _, m := range t.msgs[k:] {
				merged.tokens += m.Tokens
			}
			return merged
		})
	out.msgs = out.msgs[:len(out.msgs):len(out.msgs)]
	out.enc.b = out.enc.b[:len(out.enc.b):len(out.enc.b)]
	out.enc.ends = out.enc.ends[:len(out.enc.ends):len(out.enc.ends)]
	return out
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

// The mock's tool-call headers (mock.ToolCallsHeader, mock.ToolNamesHeader;
// replay does not import the mock).
const (
	hintToolCalls = "X-Tracekit-Tool-Calls"
	hintToolNames = "X-Tracekit-Tool-Names"
	hintReasoning = "X-Tracekit-Reasoning-Tokens"
)

// setMockHints asks the mock (Config.MockHints) for the answer the trace
// recorded: its reasoning tokens when it has some, and as many tool calls as ReferenceToolCalls, of those names (0: a
// text answer; names a header list cannot carry, a comma or a control
// byte, leave the count alone). A turn without any reference answer gets
// no hint: the
// mock answers as tool_choice says, and toolCallMismatch has nothing to
// compare.
func setMockHints(req *fasthttp.Request, turn *trace.Turn) {
	var buf [128]byte
	if turn.ReasoningTokens > 0 {
		req.Header.SetBytesV(hintReasoning, strconv.AppendInt(buf[:0], int64(turn.ReasoningTokens), 10))
	}
	ref := turn.ReferenceToolCalls
	if len(ref) == 0 && turn.ReferenceAnswer == "" {
		return
	}
	req.Header.SetBytesV(hintToolCalls, strconv.AppendInt(buf[:0], int64(len(ref)), 10))
	if len(ref) == 0 {
		return
	}
	names := buf[:0]
	for k := range ref {
		if k > 0 {
			names = append(names, ',')
		}
		for i := 0; i < len(ref[k].Name); i++ {
			if c := ref[k].Name[i]; c == ',' || c < 0x20 || c == 0x7f {
				return // a name the list cannot carry: the count alone
			}
		}
		names = append(names, ref[k].Name...)
	}
	req.Header.SetBytesV(hintToolNames, names)
}

// graphOpen runs conv open-loop as a graph: every node at its own arrival
// offset, whatever its parents did, with their reference transcripts
// (referenceAnswer) as history.
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
	var transcriptOf func(p int) *transcript
	transcriptOf = func(p int) *transcript {
		n := &nodes[p]
		if !built[p] {
			hist := mergeTranscripts(&r.bo, n.parents, transcriptOf)
			msgs, tokens := r.messages(n.turn)
			a := r.referenceAnswer(n.turn)
			tr := hist.clone(0, len(msgs)+1)
			for k := range msgs {
				tr.add(&r.bo, &msgs[k])
			}
			tr.add(&r.bo, &a)
			tr.tokens += tokens + a.Tokens
			n.tr, built[p] = tr, true
		}
		return &n.tr
	}
	done := make(chan struct{}, len(nodes))
	launched := 0
	for _, i := range order {
		n := &nodes[i]
		at := r.start + r.scale(n.turn.ArrivalOffsetNs)
		// Prepared before its arrival time, one body at a time.
		hist := mergeTranscripts(&r.bo, n.parents, transcriptOf)
		msgs, tokens := r.messages(n.turn)
		bp := r.bodies.Get().(*[]byte)
		if ep := r.endpointOf(n.turn); !r.encodedHere(ep) {
			*bp = r.appendAPIBody((*bp)[:0], ep, r.model(n.turn), n.turn, hist.msgs, msgs, "")
		} else {
			*bp = r.bo.appendBodyMsgs((*bp)[:0], r.model(n.turn), hist.enc.b, len(hist.msgs), msgs, n.turn)
		}
		if !r.waitUntil(stopCtx, at, true) {
			r.bodies.Put(bp)
			break
		}
		input := hist.tokens + tokens
		media := mediaOf(hist.msgs).plus(mediaOf(msgs))
		launched++
		go func() {
			defer func() { done <- struct{}{} }()
			defer r.bodies.Put(bp)
			ex := r.exPool.Get().(*exchange)
			defer r.exPool.Put(ex)
			ex.agent = n.agent
			ex.media = media
			r.do(runCtx, stopCtx, ex, n.turn, *bp, input, at)
		}()
	}
	for range launched {
		<-done
	}
}
