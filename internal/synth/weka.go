package synth

import (
	"container/heap"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// Weka imports kv-cache-tester's agentic coding traces (the Weka format,
// also published as SemiAnalysis' cc-traces-weka corpora): one JSON
// object per session, {id, block_size, hash_id_scope, requests: [...]},
// a file of one object, a JSON Lines file of many, or a directory of
// them. Every session becomes one conversation of the trace, a dependency
// graph whose nodes are its calls (type "n" or "s") and its subagents'
// nested calls:
//
//   - a parent call waits for the parent call before it;
//   - a subagent marker spawns its calls on the parent call before it in
//     the list: the subagent's first call waits for that call, each next
//     one for the one before it; a nested t smaller than the marker's is
//     relative to the spawn (the repository's files), else on the
//     parent's clock (the published corpora), as AIPerf and inference-perf
//     read it;
//   - the subagent joins the first later parent call whose t is at or
//     after its end (the marker's t plus duration_ms, else its last
//     call's t plus api_time), as AIPerf's current loader does: that call
//     also waits for the subagent's last call. Without such a call the
//     subagent runs in the background; a subagent before any parent call
//     starts with the session;
//   - the parent keeps sending while its subagents run: only the join
//     waits for them.
//
// Prompts carry no text: each call is one virtual message of its
// recorded input tokens (the whole prompt, not a delta: no history is
// carried, every edge is wait-only, trace.Turn.After), its hash_ids as
// PrefixHashes in blocks of block_size tokens (salted by the session id
// under hash_id_scope "local", so that two sessions never share a block
// by accident), so the server sees the recorded prefix reuse. out is the
// output length. A node's delay is its t minus the latest end (t +
// api_time) of what it waits for, AIPerf's end-to-start timing; its
// open-loop arrival is its t. Every session starts at the trace's start.
// Model names are informational (stamped only with Model).
type Weka struct {
	Opts    WekaOptions
	report  wekaReport
	prompts *trace.PromptGenerator
}

// WekaOptions configure a Weka import.
type WekaOptions struct {
	Path     string // a file (JSON or JSON Lines) or a directory of them
	Limit    int    // keep the first Limit sessions; 0 all
	Model    string // stamped on every request when set
	MaxBytes int64  // refuse inputs larger in total; 0 no limit
}

var (
	_ Source   = (*Weka)(nil)
	_ Reporter = (*Weka)(nil)
	_ Prompter = (*Weka)(nil)
)

// NewWeka checks o and returns the source.
func NewWeka(o WekaOptions) (*Weka, error) {
	const st = "WekaOptions"
	switch {
	case o.Path == "":
		return nil, fieldErr(st, "Path", "no input file or directory")
	case o.Limit < 0:
		return nil, fieldErr(st, "Limit", "%d is negative", o.Limit)
	}
	return &Weka{Opts: o}, nil
}

func (s *Weka) Name() string { return "weka" }

// Prompts is the generator of the virtual prompts (Prompter).
func (s *Weka) Prompts() *trace.PromptGenerator { return s.prompts }

type wekaReport struct {
	files, sessions, calls, subagents int
	joins, background, beforeParent   int
	edgesAfter, relativeSubagents     int
	blockSize                         int
}

// Report says what was read and how the graphs were made.
func (s *Weka) Report() map[string]string {
	r := s.report
	return map[string]string{
		"files":                    strconv.Itoa(r.files),
		"sessions":                 strconv.Itoa(r.sessions),
		"calls":                    strconv.Itoa(r.calls),
		"subagents":                strconv.Itoa(r.subagents),
		"subagent_joins":           strconv.Itoa(r.joins),
		"subagents_background":     strconv.Itoa(r.background),
		"subagents_before_parent":  strconv.Itoa(r.beforeParent),
		"subagents_relative_clock": strconv.Itoa(r.relativeSubagents),
		"edges_after":              strconv.Itoa(r.edgesAfter),
		"block_size":               strconv.Itoa(r.blockSize),
	}
}

type wekaSession struct {
	ID         string        `json:"id"`
	Models     []string      `json:"models"`
	BlockSize  int           `json:"block_size"`
	Scope      string        `json:"hash_id_scope"`
	ToolTokens int           `json:"tool_tokens"`
	SysTokens  int           `json:"system_tokens"`
	Requests   []wekaRequest `json:"requests"`
	Totals     any           `json:"totals"`
}

type wekaRequest struct {
	T           *float64      `json:"t"`
	Type        string        `json:"type"`
	Model       string        `json:"model"`
	In          int           `json:"in"`
	Out         int           `json:"out"`
	HashIDs     []int64       `json:"hash_ids"`
	InputTypes  []string      `json:"input_types"`
	OutputTypes []string      `json:"output_types"`
	Stop        string        `json:"stop"`
	APITime     float64       `json:"api_time"`
	ThinkTime   float64       `json:"think_time"`
	TTFT        float64       `json:"ttft"`
	AgentID     string        `json:"agent_id"`
	SubType     string        `json:"subagent_type"`
	DurationMs  *float64      `json:"duration_ms"`
	TotalTokens any           `json:"total_tokens"`
	ToolUses    any           `json:"tool_use_count"`
	Status      string        `json:"status"`
	SubModels   []string      `json:"models"`
	ToolTokens  int           `json:"tool_tokens"`
	SysTokens   int           `json:"system_tokens"`
	Requests    []wekaRequest `json:"requests"`
}

// Conversations reads every input and builds the graphs.
func (s *Weka) Conversations(ctx context.Context) ([]Conversation, error) {
	files, err := wekaFiles(s.Opts.Path)
	if err != nil {
		return nil, err
	}
	s.report = wekaReport{files: len(files)}
	var convs []Conversation
	var total int64
	seen := map[string]string{}
	add := func(path string, line int, b []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		total += int64(len(b))
		if s.Opts.MaxBytes > 0 && total > s.Opts.MaxBytes {
			return fieldErr("WekaOptions", "MaxBytes", "%w: the inputs hold more than %s", ErrTooLarge, formatBytes(float64(s.Opts.MaxBytes)))
		}
		if s.Opts.Limit > 0 && len(convs) == s.Opts.Limit {
			return nil
		}
		var ss wekaSession
		if err := strictJSON(b, &ss); err != nil {
			f := jsonFaultOf(err)
			return f.rowError(path, b, line, f.off, "")
		}
		if where, dup := seen[ss.ID]; dup {
			return &RowError{File: path, Line: line, Field: "id", Err: fmt.Errorf("session %q is also in %s", ss.ID, where)}
		}
		seen[ss.ID] = fmt.Sprintf("%s line %d", path, line)
		c, err := s.graph(path, line, &ss)
		if err != nil {
			return err
		}
		convs = append(convs, c)
		return nil
	}
	for _, path := range files {
		if strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(path, ".gz"), ".zst"), ".jsonl") {
			if _, err := eachLine(path, func(line int, b []byte) error { return add(path, line, b) }); err != nil {
				return nil, err
			}
			continue
		}
		b, err := ReadInput(path)
		if err != nil {
			return nil, err
		}
		if err := add(path, 1, b); err != nil {
			return nil, err
		}
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("%s: %w: no session", s.Opts.Path, ErrNoConversations)
	}
	s.report.sessions = len(convs)
	s.prompts = &trace.PromptGenerator{Name: trace.PromptGeneratorBlocks, Tokenizer: tokenizer.Default().Name(), BlockSize: s.report.blockSize}
	sort.SliceStable(convs, func(i, j int) bool { return convs[i][0].ConversationID < convs[j][0].ConversationID })
	return convs, nil
}

// wekaFiles is path, or the .json and .jsonl files (optionally .gz or
// .zst) of the directory path in name order.
func wekaFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", path, err)
	}
	var files []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && !strings.HasPrefix(n, ".") && otelFileName(n) {
			files = append(files, filepath.Join(path, n))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory %s: no .json or .jsonl (optionally .gz or .zst) file", path)
	}
	return files, nil
}

// wekaNode is one call of a session.
type wekaNode struct {
	req   *wekaRequest
	field string  // where it is in the object, for errors
	at    float64 // seconds on the parent's clock
	deps  []int
	list  int // order in the object
	index int
}

// graph builds one session's conversation.
func (s *Weka) graph(path string, line int, ss *wekaSession) (Conversation, error) {
	bad := func(field, format string, args ...any) error {
		return &RowError{File: path, Line: line, Field: field, Err: fmt.Errorf("session %q: "+format, append([]any{ss.ID}, args...)...)}
	}
	switch {
	case ss.ID == "":
		return nil, bad("id", "missing")
	case ss.BlockSize <= 0:
		return nil, bad("block_size", "%d: want the tokens per hash block", ss.BlockSize)
	case s.report.blockSize != 0 && ss.BlockSize != s.report.blockSize:
		return nil, bad("block_size", "%d, but earlier sessions have %d: a trace has one block size", ss.BlockSize, s.report.blockSize)
	case ss.Scope != "" && ss.Scope != "local" && ss.Scope != "global":
		return nil, bad("hash_id_scope", "%q: want local or global", ss.Scope)
	}
	s.report.blockSize = ss.BlockSize
	var nodes []*wekaNode
	call := func(r *wekaRequest, field string, at float64) (int, error) {
		switch {
		case r.Type != "n" && r.Type != "s":
			return 0, bad(field+".type", "%q: want n, s or subagent", r.Type)
		case r.In < 1:
			return 0, bad(field+".in", "%d: want the prompt's tokens, at least 1", r.In)
		case r.Out < 0:
			return 0, bad(field+".out", "%d is negative", r.Out)
		case len(r.HashIDs) > (r.In+ss.BlockSize-1)/ss.BlockSize:
			return 0, bad(field+".hash_ids", "%d ids for %d tokens in blocks of %d", len(r.HashIDs), r.In, ss.BlockSize)
		case r.APITime < 0 || math.IsNaN(r.APITime):
			return 0, bad(field+".api_time", "%v is negative", r.APITime)
		}
		nodes = append(nodes, &wekaNode{req: r, field: field, at: at, list: len(nodes)})
		return len(nodes) - 1, nil
	}
	lastParent := -1
	var parents []int // the parent's calls, in list order
	type sub struct {
		first, last int
		end         float64
		spawn       int
	}
	var subs []sub
	for i := range ss.Requests {
		r := &ss.Requests[i]
		field := fmt.Sprintf("requests[%d]", i)
		if r.T == nil || *r.T < 0 {
			return nil, bad(field+".t", "missing or negative: want seconds since the session start")
		}
		if r.Type != "subagent" {
			k, err := call(r, field, *r.T)
			if err != nil {
				return nil, err
			}
			if lastParent >= 0 {
				nodes[k].deps = append(nodes[k].deps, lastParent)
			}
			lastParent = k
			parents = append(parents, k)
			continue
		}
		s.report.subagents++
		if len(r.Requests) == 0 {
			continue
		}
		sb := sub{first: -1, spawn: lastParent}
		relative := *r.Requests[0].T < *r.T
		if relative {
			s.report.relativeSubagents++
		}
		prev := lastParent
		for j := range r.Requests {
			q := &r.Requests[j]
			f := fmt.Sprintf("%s.requests[%d]", field, j)
			if q.T == nil || *q.T < 0 {
				return nil, bad(f+".t", "missing or negative")
			}
			at := *q.T
			if at < *r.T {
				at += *r.T
			}
			k, err := call(q, f, at)
			if err != nil {
				return nil, err
			}
			if prev >= 0 {
				nodes[k].deps = append(nodes[k].deps, prev)
			}
			if sb.first < 0 {
				sb.first = k
			}
			prev, sb.last = k, k
			sb.end = at + q.APITime
		}
		if r.DurationMs != nil {
			sb.end = *r.T + *r.DurationMs/1e3
		}
		if sb.spawn < 0 {
			s.report.beforeParent++
		}
		subs = append(subs, sb)
	}
	// joins: the first later parent call at or after the subagent's end
	for _, sb := range subs {
		joined := false
		for _, k := range parents {
			if k > sb.last && nodes[k].at >= sb.end {
				nodes[k].deps = append(nodes[k].deps, sb.last)
				joined = true
				break
			}
		}
		if joined {
			s.report.joins++
		} else {
			s.report.background++
		}
	}
	if len(nodes) == 0 {
		return nil, bad("requests", "no calls")
	}
	order, ok := topoOrder(len(nodes), func(k int) []int { return nodes[k].deps }, func(a, b int) bool {
		if nodes[a].at != nodes[b].at {
			return nodes[a].at < nodes[b].at
		}
		return a < b
	})
	if !ok {
		return nil, bad("requests", "the calls wait on each other in a cycle")
	}
	for i, k := range order {
		nodes[k].index = i
	}
	h := fnv.New64a()
	h.Write([]byte(ss.ID))
	salt := h.Sum64()
	if ss.Scope == "global" {
		salt = 0
	}
	t0 := nodes[order[0]].at
	conv := make(Conversation, len(order))
	for i, k := range order {
		n := nodes[k]
		r := n.req
		t := &conv[i]
		t.ConversationID = ss.ID
		t.Turn = int32(i)
		t.ArrivalOffsetNs = int64(math.Round((n.at - t0) * 1e9))
		seed := int64(salt ^ uint64(i+1)*0x9e3779b97f4a7c15)
		t.Messages = []trace.Message{{Role: "user", Tokens: int32(r.In), Virtual: true, BlockSeed: seed}}
		t.InputTokens = int32(r.In)
		t.OutputTokens = int32(max(r.Out, 1))
		t.Model = s.Opts.Model
		for _, id := range r.HashIDs {
			t.PrefixHashes = append(t.PrefixHashes, int64(salt^uint64(id)*0x9e3779b97f4a7c15))
		}
		if i > 0 {
			t.Parents = []int32{trace.RootParent}
		}
		end := t0
		for _, d := range n.deps {
			t.After = append(t.After, int32(nodes[d].index))
			end = max(end, nodes[d].at+nodes[d].req.APITime)
		}
		sort.Slice(t.After, func(a, b int) bool { return t.After[a] < t.After[b] })
		if i > 0 {
			t.ThinkTimeNs = max(int64(math.Round((n.at-end)*1e9)), 0)
		}
		s.report.edgesAfter += len(n.deps)
	}
	s.report.calls += len(conv)
	return conv, nil
}

// topoOrder numbers n nodes so that every node follows its deps, ready
// nodes least first; false when deps have a cycle.
func topoOrder(n int, deps func(int) []int, less func(a, b int) bool) ([]int, bool) {
	waiters := make([][]int, n)
	pending := make([]int, n)
	r := &intHeap{less: less}
	for k := range n {
		for _, d := range deps(k) {
			waiters[d] = append(waiters[d], k)
			pending[k]++
		}
		if pending[k] == 0 {
			r.v = append(r.v, k)
		}
	}
	heap.Init(r)
	var order []int
	for r.Len() > 0 {
		k := heap.Pop(r).(int)
		order = append(order, k)
		for _, w := range waiters[k] {
			if pending[w]--; pending[w] == 0 {
				heap.Push(r, w)
			}
		}
	}
	return order, len(order) == n
}

type intHeap struct {
	v    []int
	less func(a, b int) bool
}

func (h *intHeap) Len() int           { return len(h.v) }
func (h *intHeap) Less(i, j int) bool { return h.less(h.v[i], h.v[j]) }
func (h *intHeap) Swap(i, j int)      { h.v[i], h.v[j] = h.v[j], h.v[i] }
func (h *intHeap) Push(x any)         { h.v = append(h.v, x.(int)) }
func (h *intHeap) Pop() any {
	x := h.v[len(h.v)-1]
	h.v = h.v[:len(h.v)-1]
	return x
}
