package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// Dynamo imports NVIDIA Dynamo's request traces (dynamo.request.trace.v1,
// the frontend's DYN_REQUEST_TRACE JSON Lines, plain or gzip, bare or in
// the sink's {"timestamp", "event"} wrapper; a file or a directory of
// segments). Only request_end rows become requests; tool events are read
// over (their time is in the gaps between requests).
//
// Rows with agent_context become dependency graphs, by Dynamo's documented
// lowering: the requests of one session_id are chained in start order
// (request_received_ms); a session with a parent_session_id is a child:
// its first request waits for the latest parent request started before
// it (the launch), and the first parent request started after the child's
// last request finished (the join) waits for the child's last-finishing
// request; a child launched before any parent request starts with the
// conversation. A conversation is a root session with its descendants.
// Rows without agent_context are single requests at their received time;
// a trace mixing both is refused, as Dynamo's replay refuses it.
//
// A request's delay is its recorded start minus the recorded completion
// (received + total_time_ms) of its latest dependency; its open-loop
// arrival its recorded start. Prompts are virtual messages of
// replay.input_length tokens (else input_tokens) whose blocks are
// replay.input_sequence_hashes in blocks of trace_block_size (one size
// per trace), equal hash, equal block; every edge is wait-only
// (trace.Turn.After): no history is carried, the prompt is whole.
type Dynamo struct {
	Opts    DynamoOptions
	report  dynReport
	prompts *trace.PromptGenerator
}

// DynamoOptions configure a Dynamo import.
type DynamoOptions struct {
	Path     string // a file or a directory of .jsonl(.gz) segments
	Limit    int    // keep the first Limit conversations in start order; 0 all
	Model    string // stamped on every request when set
	MaxBytes int64  // refuse inputs larger in total; 0 no limit
}

var (
	_ Source   = (*Dynamo)(nil)
	_ Reporter = (*Dynamo)(nil)
	_ Prompter = (*Dynamo)(nil)
)

// NewDynamo checks o and returns the source.
func NewDynamo(o DynamoOptions) (*Dynamo, error) {
	const st = "DynamoOptions"
	switch {
	case o.Path == "":
		return nil, fieldErr(st, "Path", "no input file or directory")
	case o.Limit < 0:
		return nil, fieldErr(st, "Limit", "%d is negative", o.Limit)
	}
	return &Dynamo{Opts: o}, nil
}

func (s *Dynamo) Name() string { return "dynamo" }

// Prompts is the generator of the virtual prompts (Prompter).
func (s *Dynamo) Prompts() *trace.PromptGenerator { return s.prompts }

type dynReport struct {
	files, rows, requests, otherEvents, sessions, children int
	launches, joins, edgesAfter, conversations, blockSize  int
	noHashes                                               int
}

// Report says what was read and how the graphs were made.
func (s *Dynamo) Report() map[string]string {
	r := s.report
	return map[string]string{
		"files":                   strconv.Itoa(r.files),
		"rows":                    strconv.Itoa(r.rows),
		"requests":                strconv.Itoa(r.requests),
		"other_events":            strconv.Itoa(r.otherEvents),
		"sessions":                strconv.Itoa(r.sessions),
		"child_sessions":          strconv.Itoa(r.children),
		"launches":                strconv.Itoa(r.launches),
		"joins":                   strconv.Itoa(r.joins),
		"edges_after":             strconv.Itoa(r.edgesAfter),
		"conversations":           strconv.Itoa(r.conversations),
		"block_size":              strconv.Itoa(r.blockSize),
		"requests_without_hashes": strconv.Itoa(r.noHashes),
	}
}

type dynRow struct {
	Schema       string          `json:"schema"`
	EventType    string          `json:"event_type"`
	Event        json.RawMessage `json:"event"`
	AgentContext *struct {
		SessionID       string `json:"session_id"`
		ParentSessionID string `json:"parent_session_id"`
	} `json:"agent_context"`
	Request *struct {
		RequestID         string   `json:"request_id"`
		InputTokens       int      `json:"input_tokens"`
		OutputTokens      int      `json:"output_tokens"`
		RequestReceivedMs *float64 `json:"request_received_ms"`
		TotalTimeMs       float64  `json:"total_time_ms"`
		Replay            *struct {
			TraceBlockSize      int      `json:"trace_block_size"`
			InputLength         int      `json:"input_length"`
			InputSequenceHashes []uint64 `json:"input_sequence_hashes"`
		} `json:"replay"`
	} `json:"request"`
}

// dynReq is one request_end row, kept small.
type dynReq struct {
	session, parent string
	start, end      float64 // ms, wall clock
	in, out         int
	hashes          []int64
	deps            []int
	index           int
}

// Conversations reads every segment and builds the graphs.
func (s *Dynamo) Conversations(ctx context.Context) ([]Conversation, error) {
	files, err := dynFiles(s.Opts.Path)
	if err != nil {
		return nil, err
	}
	s.report = dynReport{files: len(files)}
	var reqs []*dynReq
	var total int64
	agent := -1 // unknown, 0 without agent_context, 1 with
	for _, path := range files {
		_, err := eachLine(path, func(line int, b []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			total += int64(len(b)) + 1
			if s.Opts.MaxBytes > 0 && total > s.Opts.MaxBytes {
				return fieldErr("DynamoOptions", "MaxBytes", "%w: the inputs hold more than %s", ErrTooLarge, formatBytes(float64(s.Opts.MaxBytes)))
			}
			s.report.rows++
			var r dynRow
			if err := json.Unmarshal(b, &r); err != nil {
				f := jsonFaultOf(err)
				return f.rowError(path, b, line, f.off, "")
			}
			if r.Schema == "" && len(r.Event) > 0 { // the sink's wrapper
				inner := r.Event
				r = dynRow{}
				if err := json.Unmarshal(inner, &r); err != nil {
					f := jsonFaultOf(err)
					return f.rowError(path, b, line, -1, "event")
				}
			}
			bad := func(field, format string, args ...any) error {
				return &RowError{File: path, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
			}
			if r.Schema != "dynamo.request.trace.v1" && r.Schema != "dynamo.agent.trace.v1" {
				return bad("schema", "%q: want dynamo.request.trace.v1", r.Schema)
			}
			if r.EventType != "request_end" {
				s.report.otherEvents++
				return nil
			}
			q := r.Request
			switch {
			case q == nil:
				return bad("request", "missing on a request_end row")
			case q.RequestReceivedMs == nil:
				return bad("request.request_received_ms", "missing")
			case q.TotalTimeMs < 0:
				return bad("request.total_time_ms", "%v is negative", q.TotalTimeMs)
			case q.OutputTokens < 0:
				return bad("request.output_tokens", "%d is negative", q.OutputTokens)
			}
			d := &dynReq{start: *q.RequestReceivedMs, end: *q.RequestReceivedMs + q.TotalTimeMs, in: q.InputTokens, out: q.OutputTokens}
			if rp := q.Replay; rp != nil {
				if rp.InputLength > 0 {
					d.in = rp.InputLength
				}
				if len(rp.InputSequenceHashes) > 0 {
					if rp.TraceBlockSize <= 0 {
						return bad("request.replay.trace_block_size", "%d: want the tokens per hash block", rp.TraceBlockSize)
					}
					if s.report.blockSize != 0 && rp.TraceBlockSize != s.report.blockSize {
						return bad("request.replay.trace_block_size", "%d, but earlier rows have %d: a trace has one block size", rp.TraceBlockSize, s.report.blockSize)
					}
					s.report.blockSize = rp.TraceBlockSize
					if n := (d.in + rp.TraceBlockSize - 1) / rp.TraceBlockSize; len(rp.InputSequenceHashes) > n {
						return bad("request.replay.input_sequence_hashes", "%d hashes for %d tokens in blocks of %d", len(rp.InputSequenceHashes), d.in, rp.TraceBlockSize)
					}
					for _, h := range rp.InputSequenceHashes {
						d.hashes = append(d.hashes, int64(h))
					}
				}
			}
			if len(d.hashes) == 0 {
				s.report.noHashes++
			}
			if d.in < 1 {
				return bad("request.input_tokens", "%d: want the prompt's tokens, at least 1", d.in)
			}
			has := 0
			if r.AgentContext != nil && r.AgentContext.SessionID != "" {
				has = 1
				d.session, d.parent = r.AgentContext.SessionID, r.AgentContext.ParentSessionID
			}
			if agent >= 0 && has != agent {
				return bad("agent_context", "rows with and without agent_context are mixed: want one or the other")
			}
			agent = has
			reqs = append(reqs, d)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	s.report.requests = len(reqs)
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: %w: no request_end row", s.Opts.Path, ErrNoConversations)
	}
	if s.report.blockSize == 0 {
		s.report.blockSize = 64
	}
	s.prompts = &trace.PromptGenerator{Name: trace.PromptGeneratorBlocks, Tokenizer: tokenizer.Default().Name(), BlockSize: s.report.blockSize}
	var groups [][]*dynReq
	if agent == 1 {
		groups = s.graphs(reqs)
	} else {
		for i, r := range reqs {
			r.session = "request-" + strconv.Itoa(i)
			groups = append(groups, []*dynReq{r})
		}
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i][0].start < groups[j][0].start })
	if s.Opts.Limit > 0 && len(groups) > s.Opts.Limit {
		groups = groups[:s.Opts.Limit]
	}
	origin := groups[0][0].start
	convs := make([]Conversation, len(groups))
	for i, g := range groups {
		convs[i] = s.conversation(g, origin)
	}
	s.report.conversations = len(convs)
	return convs, nil
}

// graphs lowers agent rows to one group per root session, each node's
// deps set, nodes in an order where deps come first.
func (s *Dynamo) graphs(reqs []*dynReq) [][]*dynReq {
	bySession := map[string][]*dynReq{}
	var order []string
	for _, r := range reqs {
		if bySession[r.session] == nil {
			order = append(order, r.session)
		}
		bySession[r.session] = append(bySession[r.session], r)
	}
	s.report.sessions = len(order)
	parentOf := map[string]string{}
	for _, id := range order {
		rs := bySession[id]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].start < rs[j].start })
		for k := 1; k < len(rs); k++ {
			rs[k].deps = append(rs[k].deps, k-1)
		}
		for _, r := range rs {
			if p := r.parent; p != "" && p != id && bySession[p] != nil {
				parentOf[id] = p
			}
		}
	}
	root := func(id string) string {
		seen := map[string]bool{}
		for parentOf[id] != "" && !seen[id] {
			seen[id] = true
			id = parentOf[id]
		}
		return id
	}
	members := map[string][]string{}
	var roots []string
	for _, id := range order {
		r := root(id)
		if members[r] == nil {
			roots = append(roots, r)
		}
		members[r] = append(members[r], id)
	}
	var groups [][]*dynReq
	for _, rt := range roots {
		// flatten, with deps as indices into the group
		var nodes []*dynReq
		base := map[string]int{}
		for _, id := range members[rt] {
			base[id] = len(nodes)
			nodes = append(nodes, bySession[id]...)
		}
		deps := make([][]int, len(nodes))
		for _, id := range members[rt] {
			for k, r := range bySession[id] {
				for _, d := range r.deps {
					deps[base[id]+k] = append(deps[base[id]+k], base[id]+d)
				}
			}
		}
		chains := make([][]int, len(nodes))
		for k := range deps {
			chains[k] = append([]int(nil), deps[k]...)
		}
		for _, id := range members[rt] {
			p, ok := parentOf[id]
			if !ok || id == rt {
				continue
			}
			s.report.children++
			child, par := bySession[id], bySession[p]
			first := child[0]
			launch := -1
			for k, r := range par {
				if r.start <= first.start {
					launch = k
				}
			}
			if launch >= 0 {
				deps[base[id]] = append(deps[base[id]], base[p]+launch)
				s.report.launches++
			}
			last := 0
			for k, r := range child {
				if r.end >= child[last].end {
					last = k
				}
			}
			for k, r := range par {
				if k > launch && r.start >= child[last].end {
					deps[base[p]+k] = append(deps[base[p]+k], base[id]+last)
					s.report.joins++
					break
				}
			}
		}
		ord, ok := topoOrder(len(nodes), func(k int) []int { return deps[k] }, func(a, b int) bool {
			if nodes[a].start != nodes[b].start {
				return nodes[a].start < nodes[b].start
			}
			return a < b
		})
		if !ok { // a launch and a join that cross: keep the session chains only
			deps = chains
			ord, _ = topoOrder(len(nodes), func(k int) []int { return deps[k] }, func(a, b int) bool { return nodes[a].start < nodes[b].start })
		}
		g := make([]*dynReq, len(ord))
		pos := make([]int, len(nodes))
		for i, k := range ord {
			pos[k] = i
		}
		for i, k := range ord {
			n := *nodes[k]
			n.session = rt
			n.deps = nil
			for _, d := range deps[k] {
				n.deps = append(n.deps, pos[d])
			}
			sort.Ints(n.deps)
			g[i] = &n
		}
		groups = append(groups, g)
	}
	return groups
}

// conversation makes a group's turns; origin is the trace's start (ms).
func (s *Dynamo) conversation(g []*dynReq, origin float64) Conversation {
	ms := func(v float64) int64 { return int64(math.Round(v * 1e6)) }
	c := make(Conversation, len(g))
	for i, r := range g {
		t := &c[i]
		t.ConversationID = r.session
		t.Turn = int32(i)
		t.StartOffsetNs = ms(g[0].start - origin)
		t.ArrivalOffsetNs = ms(r.start - origin)
		t.Messages = []trace.Message{{Role: "user", Tokens: int32(r.in), Virtual: true, BlockSeed: int64(i + 1)}}
		t.InputTokens = int32(r.in)
		t.OutputTokens = int32(max(r.out, 1))
		t.Model = s.Opts.Model
		t.PrefixHashes = r.hashes
		end := g[0].start
		for _, d := range r.deps {
			t.After = append(t.After, int32(d))
			end = max(end, g[d].end)
		}
		if i > 0 {
			t.Parents = []int32{trace.RootParent}
			t.ThinkTimeNs = max(ms(r.start-end), 0)
		}
		s.report.edgesAfter += len(r.deps)
	}
	return c
}

func dynFiles(path string) ([]string, error) {
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
		return nil, fmt.Errorf("directory %s: no .jsonl (optionally .gz or .zst) file", path)
	}
	return files, nil
}
