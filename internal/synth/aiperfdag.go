package synth

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// AIPerfDAG imports AIPerf's dag_jsonl datasets (branching conversations:
// one JSON object per line, a session with its turns; sessions started by
// another's spawns or forks) as dependency graphs. Each session that no
// other starts is the root of one conversation of the trace; the sessions
// it starts, transitively, are nodes of the same graph. The rules:
//
//   - a session's turn k>0 follows its turn k-1: with the default context
//     mode it takes that turn's transcript as its history (a parent);
//     with context_mode "message_array_with_responses" it sends its own
//     messages only and waits for turn k-1 without its history (a
//     wait-only edge, trace.Turn.After);
//   - forks on turn k (a child id, or {child, background}): the child's
//     first turn takes turn k's transcript as its history (a parent); a
//     bare id ends the forking session after turn k (its later turns are
//     not sent, and counted in the report); background lets it go on;
//   - spawns on turn k (a child id, or {children, join_at}): the child
//     starts with an empty history once turn k is answered (its first turn
//     a root waiting for turn k); the child joins the spawning session at
//     its next turn (a bare id) or at turn join_at: that turn also waits
//     for the child's last turn, without its history (AIPerf threads only
//     the session's own context);
//   - pre_session_spawns start their children with the session, without
//     waiting for anything the session does.
//
// A turn's delay (milliseconds) is its think time after the last of its
// dependencies ended. Messages are the turn's messages (their text counted
// with Tokenizer), max_tokens the output length (DAGDefaultOutputTokens when
// absent), model and tools are sent as recorded; extra (fields merged into
// the request body) cannot be carried by a trace and is counted in the
// report. Nodes are numbered in dependency order, ties by the session's
// line and the turn's index. The orchestrator form (conversation-level
// rounds of spawns) is refused by name. Conversations have no arrival
// times: the --rate schedule starts them.
type AIPerfDAG struct {
	Opts   AIPerfDAGOptions
	report dagReport
	byID   map[string]*dagSession
}

// AIPerfDAGOptions configure an AIPerf dag_jsonl import.
type AIPerfDAGOptions struct {
	Path      string
	Tokenizer tokenizer.Tokenizer
	Limit     int    // keep the first Limit root sessions in file order; 0 all
	Model     string // stamped on every request when set, over the file's
	MaxBytes  int64  // refuse a file larger; 0 no limit
}

// DAGDefaultOutputTokens is the output length of a dag_jsonl turn without
// max_tokens.
const DAGDefaultOutputTokens = 256

var (
	_ Source   = (*AIPerfDAG)(nil)
	_ Reporter = (*AIPerfDAG)(nil)
)

// NewAIPerfDAG checks o and returns the source.
func NewAIPerfDAG(o AIPerfDAGOptions) (*AIPerfDAG, error) {
	const st = "AIPerfDAGOptions"
	switch {
	case o.Path == "":
		return nil, fieldErr(st, "Path", "no input file")
	case o.Tokenizer == nil:
		return nil, fieldErr(st, "Tokenizer", "no tokenizer")
	case o.Limit < 0:
		return nil, fieldErr(st, "Limit", "%d is negative", o.Limit)
	}
	return &AIPerfDAG{Opts: o}, nil
}

func (s *AIPerfDAG) Name() string { return "aiperf-dag" }

type dagReport struct {
	sessions, conversations, turns  int
	edgesHistory, edgesAfter, roots int
	endedByFork, joinsPastEnd       int
	outDefault, extraIgnored        int
}

// Report says what was read and how the graphs were made.
func (s *AIPerfDAG) Report() map[string]string {
	r := s.report
	return map[string]string{
		"sessions":              strconv.Itoa(r.sessions),
		"conversations":         strconv.Itoa(r.conversations),
		"turns":                 strconv.Itoa(r.turns),
		"roots":                 strconv.Itoa(r.roots),
		"edges_history":         strconv.Itoa(r.edgesHistory),
		"edges_after":           strconv.Itoa(r.edgesAfter),
		"turns_ended_by_fork":   strconv.Itoa(r.endedByFork),
		"joins_past_last_turn":  strconv.Itoa(r.joinsPastEnd),
		"output_tokens_default": strconv.Itoa(r.outDefault),
		"turns_extra_not_sent":  strconv.Itoa(r.extraIgnored),
	}
}

// dagSession is one line of the file.
type dagSession struct {
	SessionID        string      `json:"session_id"`
	Turns            []dagTurn   `json:"turns"`
	PreSessionSpawns []string    `json:"pre_session_spawns"`
	ContextMode      string      `json:"context_mode"`
	Orchestrator     bool        `json:"orchestrator"`
	Spawns           any         `json:"spawns"`
	Rounds           any         `json:"rounds"`
	ThinkTimeMs      *float64    `json:"think_time_ms"`
	ThinkTimeSigma   *float64    `json:"think_time_sigma"`
	ThinkTimeMinMs   *float64    `json:"think_time_min_ms"`
	ThinkTimeMaxMs   *float64    `json:"think_time_max_ms"`
	line             int         // 1-based line in the file
	index            int         // order in the file
	started          *dagStarter // who starts it; nil for a root
}

// dagStarter is where a child session starts.
type dagStarter struct {
	by   *dagSession
	turn int  // the starting turn; -1 for pre_session_spawns
	fork bool // forked: the child inherits the turn's transcript
}

type dagTurn struct {
	Model     string            `json:"model"`
	Messages  []json.RawMessage `json:"messages"`
	MaxTokens *int              `json:"max_tokens"`
	Tools     json.RawMessage   `json:"tools"`
	Extra     json.RawMessage   `json:"extra"`
	Delay     float64           `json:"delay"`
	Forks     []json.RawMessage `json:"forks"`
	Spawns    []json.RawMessage `json:"spawns"`
}

// dagMessage is an OpenAI chat message of a turn.
type dagMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// dagEdge is a child started by a turn, with the parent turn it joins
// (-1: none).
type dagEdge struct {
	child  string
	fork   bool
	ends   bool // a bare fork: the parent stops after this turn
	joinAt int
	field  string
}

// Conversations reads the file and builds the graphs.
func (s *AIPerfDAG) Conversations(ctx context.Context) ([]Conversation, error) {
	path := s.Opts.Path
	s.report = dagReport{}
	var sessions []*dagSession
	byID := map[string]*dagSession{}
	s.byID = byID
	var total int64
	_, err := eachLine(path, func(line int, text []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		total += int64(len(text)) + 1
		if s.Opts.MaxBytes > 0 && total > s.Opts.MaxBytes {
			return fieldErr("AIPerfDAGOptions", "MaxBytes", "%w: %s holds more than %s", ErrTooLarge, path, formatBytes(float64(s.Opts.MaxBytes)))
		}
		d := json.NewDecoder(bytes.NewReader(text))
		d.DisallowUnknownFields()
		ss := &dagSession{line: line, index: len(sessions)}
		if err := d.Decode(ss); err != nil {
			f := jsonFaultOf(err)
			return f.rowError(path, text, line, f.off, "")
		}
		rowErr := func(field, format string, args ...any) error {
			return &RowError{File: path, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
		}
		switch {
		case ss.SessionID == "":
			return rowErr("session_id", "missing: want the session's unique id")
		case byID[ss.SessionID] != nil:
			return rowErr("session_id", "%q is also the session of line %d", ss.SessionID, byID[ss.SessionID].line)
		case ss.Orchestrator || ss.Rounds != nil || ss.Spawns != nil:
			return rowErr("orchestrator", "session %q: the orchestrator form (conversation-level spawns and rounds) is not imported; write its turns out", ss.SessionID)
		case len(ss.Turns) == 0:
			return rowErr("turns", "session %q has no turns", ss.SessionID)
		case ss.ContextMode != "" && ss.ContextMode != "accumulate" && ss.ContextMode != "message_array_with_responses":
			return rowErr("context_mode", "%q: want accumulate or message_array_with_responses", ss.ContextMode)
		}
		byID[ss.SessionID] = ss
		sessions = append(sessions, ss)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.report.sessions = len(sessions)
	// who starts whom
	edges := map[*dagSession][][]dagEdge{} // per session, per turn
	ends := map[*dagSession]int{}          // last turn sent, for sessions a bare fork ends
	for _, ss := range sessions {
		ends[ss] = len(ss.Turns) - 1
		start := func(child, field string, st *dagStarter) error {
			c := byID[child]
			switch {
			case c == nil:
				return &RowError{File: path, Line: ss.line, Field: field, Err: fmt.Errorf("no session %q in the file", child)}
			case c.started != nil:
				return &RowError{File: path, Line: ss.line, Field: field, Err: fmt.Errorf("session %q is already started by session %q", child, c.started.by.SessionID)}
			case c == ss:
				return &RowError{File: path, Line: ss.line, Field: field, Err: fmt.Errorf("session %q starts itself", child)}
			}
			c.started = st
			return nil
		}
		for i, child := range ss.PreSessionSpawns {
			if err := start(child, fmt.Sprintf("pre_session_spawns[%d]", i), &dagStarter{by: ss, turn: -1}); err != nil {
				return nil, err
			}
		}
		per := make([][]dagEdge, len(ss.Turns))
		for k, t := range ss.Turns {
			es, err := dagTurnEdges(path, ss, k, t)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				if err := start(e.child, e.field, &dagStarter{by: ss, turn: k, fork: e.fork}); err != nil {
					return nil, err
				}
				if e.ends && k < ends[ss] {
					ends[ss] = k
				}
			}
			per[k] = es
		}
		edges[ss] = per
	}
	var convs []Conversation
	for _, ss := range sessions {
		if ss.started != nil {
			continue
		}
		if s.Opts.Limit > 0 && len(convs) == s.Opts.Limit {
			break
		}
		c, err := s.graph(ss, edges, ends)
		if err != nil {
			return nil, err
		}
		convs = append(convs, c)
	}
	for _, ss := range sessions { // a cycle of sessions starting each other has no root
		if ss.started != nil && dagRoot(ss) == nil {
			return nil, &RowError{File: path, Line: ss.line, Field: "session_id", Err: fmt.Errorf("session %q is started by a cycle of sessions with no root", ss.SessionID)}
		}
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("%s: %w: no session", path, ErrNoConversations)
	}
	s.report.conversations = len(convs)
	return convs, nil
}

// dagRoot is the root session that starts ss, nil when none does (a cycle).
func dagRoot(ss *dagSession) *dagSession {
	seen := map[*dagSession]bool{}
	for ss.started != nil {
		if seen[ss] {
			return nil
		}
		seen[ss] = true
		ss = ss.started.by
	}
	return ss
}

// dagTurnEdges reads turn k's forks and spawns.
func dagTurnEdges(path string, ss *dagSession, k int, t dagTurn) ([]dagEdge, error) {
	var out []dagEdge
	bad := func(field string, format string, args ...any) error {
		return &RowError{File: path, Line: ss.line, Field: field, Err: fmt.Errorf(format, args...)}
	}
	for i, raw := range t.Forks {
		field := fmt.Sprintf("turns[%d].forks[%d]", k, i)
		var id string
		if json.Unmarshal(raw, &id) == nil {
			out = append(out, dagEdge{child: id, fork: true, ends: true, joinAt: -1, field: field})
			continue
		}
		var f struct {
			Child      string `json:"child"`
			Background bool   `json:"background"`
		}
		if err := strictJSON(raw, &f); err != nil || f.Child == "" {
			return nil, bad(field, "%s: want a session id or {\"child\": id, \"background\": bool}", raw)
		}
		out = append(out, dagEdge{child: f.Child, fork: true, ends: !f.Background, joinAt: -1, field: field})
	}
	for i, raw := range t.Spawns {
		field := fmt.Sprintf("turns[%d].spawns[%d]", k, i)
		var id string
		if json.Unmarshal(raw, &id) == nil {
			out = append(out, dagEdge{child: id, joinAt: k + 1, field: field})
			continue
		}
		var sp struct {
			Children []string `json:"children"`
			JoinAt   *int     `json:"join_at"`
		}
		if err := strictJSON(raw, &sp); err != nil || len(sp.Children) == 0 {
			return nil, bad(field, "%s: want a session id or {\"children\": [ids], \"join_at\": turn}", raw)
		}
		join := k + 1
		if sp.JoinAt != nil {
			if *sp.JoinAt <= k {
				return nil, bad(field+".join_at", "%d: want a turn after the spawning turn %d", *sp.JoinAt, k)
			}
			join = *sp.JoinAt
		}
		for _, c := range sp.Children {
			out = append(out, dagEdge{child: c, joinAt: join, field: field})
		}
	}
	return out, nil
}

// strictJSON decodes raw into v, refusing unknown keys.
func strictJSON(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// dagNode is one turn of one session in a graph being built.
type dagNode struct {
	ss      *dagSession
	turn    int
	parents []*dagNode // history edges
	after   []*dagNode // wait-only edges
	root    bool       // starts a branch of its own (RootParent)
	index   int        // node number, -1 until numbered
	waiters []*dagNode // nodes depending on this one
	pending int        // dependencies not yet numbered
}

// graph builds the conversation rooted at session root.
func (s *AIPerfDAG) graph(root *dagSession, edges map[*dagSession][][]dagEdge, ends map[*dagSession]int) (Conversation, error) {
	// the sessions of this graph, in file order
	var members []*dagSession
	var collect func(ss *dagSession)
	nodes := map[*dagSession][]*dagNode{}
	collect = func(ss *dagSession) {
		members = append(members, ss)
		n := make([]*dagNode, ends[ss]+1)
		for k := range n {
			n[k] = &dagNode{ss: ss, turn: k, index: -1}
		}
		s.report.endedByFork += len(ss.Turns) - len(n)
		nodes[ss] = n
		for _, child := range ss.PreSessionSpawns {
			collect(s.byID[child])
		}
		for k := range n {
			for _, e := range edges[ss][k] {
				collect(s.byID[e.child])
			}
		}
	}
	collect(root)
	last := func(ss *dagSession) *dagNode { n := nodes[ss]; return n[len(n)-1] }
	for _, ss := range members {
		n := nodes[ss]
		for k := 1; k < len(n); k++ {
			if ss.ContextMode == "message_array_with_responses" {
				n[k].root, n[k].after = true, append(n[k].after, n[k-1])
			} else {
				n[k].parents = append(n[k].parents, n[k-1])
			}
		}
		if st := ss.started; st != nil {
			first := n[0]
			switch {
			case st.turn < 0: // with the starting session's first turn
				from := nodes[st.by][0]
				first.root = true
				first.after = append(first.after, from.after...)
				first.after = append(first.after, from.parents...)
			case st.fork:
				first.parents = append(first.parents, nodes[st.by][st.turn])
			default:
				first.root, first.after = true, append(first.after, nodes[st.by][st.turn])
			}
		} else {
			n[0].root = true
		}
		for k := range n {
			for _, e := range edges[ss][k] {
				if e.joinAt < 0 {
					continue
				}
				if e.joinAt >= len(n) {
					s.report.joinsPastEnd++
					continue
				}
				j := n[e.joinAt]
				j.after = append(j.after, last(s.byID[e.child]))
			}
		}
	}
	// number the nodes in dependency order, ties by session line and turn
	var all []*dagNode
	for _, ss := range members {
		all = append(all, nodes[ss]...)
	}
	var ready dagReady
	for _, n := range all {
		for _, d := range append(append([]*dagNode(nil), n.parents...), n.after...) {
			d.waiters = append(d.waiters, n)
			n.pending++
		}
		if n.pending == 0 {
			ready = append(ready, n)
		}
	}
	heap.Init(&ready)
	var order []*dagNode
	for ready.Len() > 0 {
		n := heap.Pop(&ready).(*dagNode)
		n.index = len(order)
		order = append(order, n)
		for _, w := range n.waiters {
			if w.pending--; w.pending == 0 {
				heap.Push(&ready, w)
			}
		}
	}
	if len(order) != len(all) {
		return nil, &RowError{File: s.Opts.Path, Line: root.line, Field: "turns", Err: fmt.Errorf("session %q: its sessions' joins wait on each other in a cycle", root.SessionID)}
	}
	conv := make(Conversation, len(order))
	tok := s.Opts.Tokenizer
	for i, n := range order {
		src := n.ss.Turns[n.turn]
		t := &conv[i]
		t.ConversationID = root.SessionID
		t.Turn = int32(i)
		t.ThinkTimeNs = int64(src.Delay * 1e6)
		t.Model = src.Model
		if s.Opts.Model != "" {
			t.Model = s.Opts.Model
		}
		for j, raw := range src.Messages {
			m, err := dagMessageOf(raw)
			if err != nil {
				return nil, &RowError{File: s.Opts.Path, Line: n.ss.line, Field: fmt.Sprintf("turns[%d].messages[%d]", n.turn, j), Err: err}
			}
			m.Tokens = int32(messageTokens(tok, m))
			t.InputTokens += m.Tokens
			t.Messages = append(t.Messages, m)
		}
		if src.MaxTokens != nil && *src.MaxTokens > 0 {
			t.OutputTokens = int32(*src.MaxTokens)
		} else {
			t.OutputTokens = DAGDefaultOutputTokens
			s.report.outDefault++
		}
		if len(src.Tools) > 0 && string(src.Tools) != "null" {
			var b bytes.Buffer
			if err := json.Compact(&b, src.Tools); err != nil {
				return nil, &RowError{File: s.Opts.Path, Line: n.ss.line, Field: fmt.Sprintf("turns[%d].tools", n.turn), Err: err}
			}
			t.Tools = b.String()
		}
		if len(src.Extra) > 0 && string(src.Extra) != "null" {
			s.report.extraIgnored++
		}
		for _, p := range n.parents {
			t.Parents = append(t.Parents, int32(p.index))
		}
		if n.root && i > 0 {
			t.Parents = []int32{trace.RootParent}
		}
		if n.root {
			s.report.roots++
		}
		for _, a := range n.after {
			t.After = append(t.After, int32(a.index))
		}
		s.report.edgesHistory += len(n.parents)
		s.report.edgesAfter += len(n.after)
	}
	s.report.turns += len(conv)
	chain := true
	for k := 1; k < len(conv); k++ {
		if p := conv[k].Parents; len(p) != 1 || p[0] != int32(k-1) || len(conv[k].After) > 0 {
			chain = false
		}
	}
	if chain { // a plain chat: the trace's default edges say it
		for k := range conv {
			conv[k].Parents = nil
		}
	}
	return conv, nil
}

// dagMessageOf reads one OpenAI message: content a string or an array of
// text parts.
func dagMessageOf(raw json.RawMessage) (trace.Message, error) {
	var m dagMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return trace.Message{}, err
	}
	if m.Role == "" {
		return trace.Message{}, errors.New("no role")
	}
	out := trace.Message{Role: m.Role, ToolCallID: m.ToolCallID}
	if len(m.Content) > 0 && string(m.Content) != "null" {
		if err := json.Unmarshal(m.Content, &out.Content); err != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(m.Content, &parts) != nil {
				return trace.Message{}, fmt.Errorf("content: want a string or an array of text parts")
			}
			for _, p := range parts {
				if p.Type != "text" {
					return trace.Message{}, fmt.Errorf("content: a %q part; only text parts are imported", p.Type)
				}
				out.Content += p.Text
			}
		}
	}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, trace.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out, nil
}

// dagReady is the nodes whose dependencies are numbered, least (session
// line, turn) first.
type dagReady []*dagNode

func (r dagReady) Len() int { return len(r) }
func (r dagReady) Less(i, j int) bool {
	if r[i].ss.index != r[j].ss.index {
		return r[i].ss.index < r[j].ss.index
	}
	return r[i].turn < r[j].turn
}
func (r dagReady) Swap(i, j int) { r[i], r[j] = r[j], r[i] }
func (r *dagReady) Push(x any)   { *r = append(*r, x.(*dagNode)) }
func (r *dagReady) Pop() any {
	old := *r
	n := old[len(old)-1]
	*r = old[:len(old)-1]
	return n
}
