package synth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/history"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// OTel imports OpenTelemetry GenAI spans of agent applications as
// dependency graphs (trace.Turn.Parents). It reads span-list JSON files
// ({"spans": [{span_id, parent_span_id, start_time, end_time, attributes}]},
// as inference-perf's test traces are) and OTLP JSON exports
// ({"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}, one object or
// JSON Lines of them, as the collector's file exporter writes), plain,
// gzip or zstd; Path is a file or a directory of them.
//
// Only LLM spans become requests: gen_ai.operation.name chat,
// text_completion or generate_content, or any span with
// gen_ai.input.messages. Other spans (agents, tools) are structure. A
// conversation is the spans of one file sharing a session id attribute
// (gen_ai.conversation.id, session.id, or any key ending in session.id or
// session_id), else a trace id.
//
// The graph is inferred per conversation, spans taken in start order:
//
//  1. history: an earlier span whose answer (text or tool calls) is an
//     assistant message of this span's input is a candidate parent;
//  2. parentage: where history names none, the nearest LLM ancestor
//     through non-LLM spans (parent_span_id) is a candidate (it can carry
//     the edge only when its transcript is a prefix of the input, which
//     its answer being in the input already finds; otherwise it becomes a
//     wait-only edge, below);
//  3. timing: a candidate must have ended before this span started;
//     overlapping spans are parallel branches, never parents.
//
// Candidates implied by another (an ancestor of one) are dropped; the rest
// are kept, in the order their answers appear in the input, as long as
// their merged transcripts (history.Merge) stay a prefix of the input, so
// that replayed history plus Messages is exactly the span's input. A
// candidate that would break that (an agent that rewrote its context
// around an earlier answer), or a parentage ancestor without an answer,
// cannot be a parent: it becomes a wait-only edge (trace.Turn.After): the
// span still waits for it in closed loop but takes no history from it
// (when no parent is left the span is a root: its history is its own
// input). A wait implied by another edge (the span's parent or wait
// already waits for it) is dropped. A node's delay (ThinkTimeNs) is its
// start minus the latest end of its parents and waits; a root's without
// waits is its start minus the conversation's first start.
//
// Messages = the input after the merged parent transcripts; the reference
// answer is the output (gen_ai.output.messages or gen_ai.output.text),
// its tool calls in ReferenceToolCalls. Message tokens are counted with
// Tokenizer; OutputTokens is gen_ai.usage.output_tokens (or
// completion_tokens) when present, else the answer's count.
type OTel struct {
	Opts   OTelOptions
	report otelReport
}

// OTelOptions configure an OTel import.
type OTelOptions struct {
	Path      string // a file, or a directory whose files are all read
	Tokenizer tokenizer.Tokenizer
	Limit     int    // keep the first Limit conversations in start order; 0 all
	Model     string // stamped on every request when set
	MaxBytes  int64  // refuse inputs larger in total; 0 no limit
	// MaxIdle shortens every stretch longer than MaxIdle in which no span
	// of the kept conversations is open (exports collected days apart, a
	// directory of unrelated captures) to MaxIdle; 0 keeps the recorded
	// times. Timing inside and between overlapping conversations is kept:
	// a conversation moves only by the idle time cut before it starts.
	MaxIdle time.Duration
}

var (
	_ Source   = (*OTel)(nil)
	_ Reporter = (*OTel)(nil)
)

// NewOTel checks o and returns the source.
func NewOTel(o OTelOptions) (*OTel, error) {
	const st = "OTelOptions"
	switch {
	case o.Path == "":
		return nil, fieldErr(st, "Path", "no input file or directory")
	case o.Tokenizer == nil:
		return nil, fieldErr(st, "Tokenizer", "no tokenizer")
	case o.Limit < 0:
		return nil, fieldErr(st, "Limit", "%d is negative", o.Limit)
	case o.MaxIdle < 0:
		return nil, fieldErr(st, "MaxIdle", "%v is negative", o.MaxIdle)
	}
	return &OTel{Opts: o}, nil
}

func (s *OTel) Name() string { return "otel" }

// otelReport counts what the import did.
type otelReport struct {
	files, spans, llmSpans, conversations    int
	edgesHistory, edgesParentage, edgesAfter int
	impliedDropped, lateDropped, roots       int
	droppedNoInput, droppedNoTime            int
	outUsage, outTokenizer                   int
	withToolCalls                            int
	idleCutNs                                int64
}

// Report says what was read, the edges by how they were inferred, what
// was dropped and why, and where output token counts came from.
func (s *OTel) Report() map[string]string {
	r := s.report
	m := map[string]string{
		"files":                      strconv.Itoa(r.files),
		"spans":                      strconv.Itoa(r.spans),
		"llm_spans":                  strconv.Itoa(r.llmSpans),
		"conversations":              strconv.Itoa(r.conversations),
		"roots":                      strconv.Itoa(r.roots),
		"edges_history":              strconv.Itoa(r.edgesHistory),
		"edges_parentage":            strconv.Itoa(r.edgesParentage),
		"edges_after":                strconv.Itoa(r.edgesAfter),
		"candidates_implied":         strconv.Itoa(r.impliedDropped),
		"dependencies_not_before":    strconv.Itoa(r.lateDropped),
		"dropped_llm_no_input":       strconv.Itoa(r.droppedNoInput),
		"input_tokens":               "tokenizer",
		"output_tokens_from_usage":   strconv.Itoa(r.outUsage),
		"output_tokens_by_tokenizer": strconv.Itoa(r.outTokenizer),
		"answers_with_tool_calls":    strconv.Itoa(r.withToolCalls),
		"idle_time_cut":              time.Duration(r.idleCutNs).String(),
	}
	return m
}

// Conversations reads every input file and builds the graphs.
func (s *OTel) Conversations(ctx context.Context) ([]Conversation, error) {
	files, err := s.inputFiles()
	if err != nil {
		return nil, err
	}
	s.report = otelReport{files: len(files)}
	var total int64
	type group struct {
		file, id string
		spans    []*otelSpan
	}
	var groups []*group
	idFiles := map[string]map[string]bool{}
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := ReadInput(path)
		if err != nil {
			return nil, err
		}
		total += int64(len(b))
		if s.Opts.MaxBytes > 0 && total > s.Opts.MaxBytes {
			return nil, fieldErr("OTelOptions", "MaxBytes", "%w: the inputs hold more than %s", ErrTooLarge, formatBytes(float64(s.Opts.MaxBytes)))
		}
		spans, err := parseOTelFile(path, b)
		if err != nil {
			return nil, err
		}
		s.report.spans += len(spans)
		byID := map[string]*group{}
		for _, sp := range spans {
			id := sp.conversationKey()
			g := byID[id]
			if g == nil {
				g = &group{file: path, id: id}
				byID[id] = g
				groups = append(groups, g)
				if idFiles[id] == nil {
					idFiles[id] = map[string]bool{}
				}
				idFiles[id][path] = true
			}
			g.spans = append(g.spans, sp)
		}
	}
	var convs []otelConv
	for _, g := range groups {
		id := g.id
		if len(idFiles[id]) > 1 { // the same id in several exports: keep them apart
			id = filepath.Base(g.file) + "/" + id
		}
		c, err := s.graph(id, g.spans)
		if err != nil {
			return nil, err
		}
		if len(c.turns) > 0 {
			convs = append(convs, c)
		}
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("%s: %w: no LLM span with input messages (gen_ai.input.messages)", s.Opts.Path, ErrNoConversations)
	}
	sort.SliceStable(convs, func(i, j int) bool { return convs[i].start < convs[j].start })
	if s.Opts.Limit > 0 && len(convs) > s.Opts.Limit {
		convs = convs[:s.Opts.Limit]
	}
	origin := convs[0].start
	out := make([]Conversation, len(convs))
	var cut, busyUntil int64 // idle time removed so far; latest span end so far
	for i, c := range convs {
		if limit := int64(s.Opts.MaxIdle); limit > 0 && i > 0 && c.start-busyUntil > limit {
			cut += c.start - busyUntil - limit
		}
		busyUntil = max(busyUntil, c.end)
		for k := range c.turns {
			c.turns[k].StartOffsetNs = c.start - origin - cut
			c.turns[k].ArrivalOffsetNs = c.arrivals[k] - origin - cut
		}
		out[i] = c.turns
	}
	s.report.conversations = len(out)
	s.report.idleCutNs = cut
	return out, nil
}

// inputFiles is Path, or the regular files of the directory Path in name
// order (hidden files skipped).
func (s *OTel) inputFiles() ([]string, error) {
	st, err := os.Stat(s.Opts.Path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", s.Opts.Path, err)
	}
	if !st.IsDir() {
		return []string{s.Opts.Path}, nil
	}
	ents, err := os.ReadDir(s.Opts.Path)
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", s.Opts.Path, err)
	}
	var files []string
	for _, e := range ents {
		name := e.Name()
		if e.Type().IsRegular() && !strings.HasPrefix(name, ".") && otelFileName(name) {
			files = append(files, filepath.Join(s.Opts.Path, name))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory %s: no .json, .jsonl (optionally .gz or .zst) file", s.Opts.Path)
	}
	return files, nil
}

// otelFileName tells the files of a directory that are read: JSON and
// JSON Lines, compressed or not (other files, a license or a README, are
// not spans).
func otelFileName(name string) bool {
	name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".zst"), ".zstd")
	return strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".jsonl")
}

// otelConv is one conversation's graph before the trace's offsets.
type otelConv struct {
	turns    Conversation
	start    int64   // first span's start, unix ns
	arrivals []int64 // each turn's span start, unix ns
	end      int64   // last span end, unix ns
}

// otelNode is an LLM span being placed in its conversation's graph.
type otelNode struct {
	sp         *otelSpan
	transcript []trace.Message // input + answer
	answer     trace.Message
	hasAnswer  bool
	ancestors  map[int]bool // through parents: whose transcripts the history holds
	waitsOn    map[int]bool // through parents and waits: what the node is sent after
}

// graph builds one conversation's turns from its spans.
func (s *OTel) graph(id string, spans []*otelSpan) (otelConv, error) {
	byID := map[string]*otelSpan{}
	for _, sp := range spans {
		byID[sp.spanID] = sp
	}
	var llm []*otelSpan
	for _, sp := range spans {
		if !sp.isLLM() {
			continue
		}
		s.report.llmSpans++
		if sp.input == nil {
			s.report.droppedNoInput++
			continue
		}
		llm = append(llm, sp)
	}
	if len(llm) == 0 {
		return otelConv{}, nil
	}
	sort.SliceStable(llm, func(i, j int) bool {
		if llm[i].start != llm[j].start {
			return llm[i].start < llm[j].start
		}
		return llm[i].end < llm[j].end
	})
	index := map[*otelSpan]int{}
	for i, sp := range llm {
		index[sp] = i
	}
	// answer text -> nodes with that answer, for the history rule
	nodes := make([]otelNode, len(llm))
	c := otelConv{start: llm[0].start, turns: make(Conversation, len(llm)), arrivals: make([]int64, len(llm))}
	tok := s.Opts.Tokenizer
	for k, sp := range llm {
		n := &nodes[k]
		n.sp = sp
		n.ancestors, n.waitsOn = map[int]bool{}, map[int]bool{}
		n.answer, n.hasAnswer = sp.answer()
		n.transcript = slices.Clone(sp.input)
		if n.hasAnswer {
			n.transcript = append(n.transcript, n.answer)
		}
		parents, kinds, waits := s.parents(nodes, k, byID, index)
		var merged []trace.Message
		var ts [][]trace.Message
		lastEnd := c.start
		for _, p := range parents {
			ts = append(ts, nodes[p].transcript)
			lastEnd = max(lastEnd, nodes[p].sp.end)
			n.ancestors[p] = true
			for a := range nodes[p].ancestors {
				n.ancestors[a] = true
			}
		}
		for _, p := range slices.Concat(parents, waits) {
			n.waitsOn[p] = true
			for a := range nodes[p].waitsOn {
				n.waitsOn[a] = true
			}
		}
		for _, w := range waits {
			lastEnd = max(lastEnd, nodes[w].sp.end)
		}
		merged = history.Merge(ts...)
		for _, kd := range kinds {
			if kd == edgeHistory {
				s.report.edgesHistory++
			} else {
				s.report.edgesParentage++
			}
		}
		t := &c.turns[k]
		t.ConversationID = id
		t.Turn = int32(k)
		t.Model = s.Opts.Model
		t.ThinkTimeNs = sp.start - lastEnd
		c.arrivals[k] = sp.start
		c.end = max(c.end, sp.end)
		switch {
		case len(parents) > 0:
			t.Parents = make([]int32, len(parents))
			for i, p := range parents {
				t.Parents[i] = int32(p)
			}
		case k > 0:
			t.Parents = []int32{trace.RootParent}
			s.report.roots++
		default:
			s.report.roots++
		}
		for _, w := range waits {
			t.After = append(t.After, int32(w))
		}
		s.report.edgesAfter += len(waits)
		for _, m := range sp.input[len(merged):] {
			m.Tokens = int32(messageTokens(tok, m))
			t.Messages = append(t.Messages, m)
			t.InputTokens += m.Tokens
		}
		t.ReferenceAnswer = n.answer.Content
		t.ReferenceToolCalls = n.answer.ToolCalls
		if len(t.ReferenceToolCalls) > 0 {
			s.report.withToolCalls++
		}
		if u, ok := sp.outputUsage(); ok {
			t.OutputTokens = int32(max(u, 1))
			s.report.outUsage++
		} else {
			t.OutputTokens = int32(max(messageTokens(tok, n.answer), 1))
			s.report.outTokenizer++
		}
		t.Tools = sp.tools
	}
	chain := true
	for k := 1; k < len(c.turns); k++ {
		if p := c.turns[k].Parents; len(p) != 1 || p[0] != int32(k-1) {
			chain = false
		}
	}
	if chain { // a plain chat: the trace's default edges say it
		for k := range c.turns {
			c.turns[k].Parents = nil
		}
	}
	return c, nil
}

// Edge kinds, for the report.
const (
	edgeHistory = iota
	edgeParentage
)

// parents chooses node k's parents among nodes[:k] by the rules in OTel's
// doc comment, with their edge kinds, and its wait-only dependencies.
func (s *OTel) parents(nodes []otelNode, k int, byID map[string]*otelSpan, index map[*otelSpan]int) (parents, kinds, waits []int) {
	sp := nodes[k].sp
	input := sp.input
	// 1. history: an assistant message of the input that is an earlier
	// node's answer; candidates in the order of their answer's position,
	// the latest-ending first among equal answers.
	type cand struct{ node, pos int }
	var cands []cand
	seen := map[int]bool{}
	for pos, m := range input {
		if m.Role != "assistant" {
			continue
		}
		var same []int
		for j := k - 1; j >= 0; j-- {
			if nodes[j].hasAnswer && !seen[j] && history.Same(&nodes[j].answer, &m) {
				same = append(same, j)
			}
		}
		sort.SliceStable(same, func(a, b int) bool { return nodes[same[a]].sp.end > nodes[same[b]].sp.end })
		for _, j := range same {
			if nodes[j].sp.end > sp.start {
				s.report.lateDropped++
				continue
			}
			seen[j] = true
			cands = append(cands, cand{j, pos})
		}
	}
	kind := edgeHistory
	if len(cands) == 0 {
		// 2. parentage through non-LLM spans
		for p := byID[sp.parentID]; p != nil; p = byID[p.parentID] {
			if j, ok := index[p]; ok && p.isLLM() && j < k {
				if p.end > sp.start {
					s.report.lateDropped++
				} else if !nodes[j].hasAnswer { // no transcript replay could rebuild: wait only
					waits = append(waits, j)
				} else {
					cands = append(cands, cand{j, 0})
				}
				break
			}
			if p.parentID == "" || p == byID[p.parentID] {
				break
			}
		}
		kind = edgeParentage
	}
	// drop candidates implied by another (their ancestors)
	var kept []cand
	for _, c := range cands {
		implied := false
		for _, d := range cands {
			if d.node != c.node && nodes[d.node].ancestors[c.node] {
				implied = true
				break
			}
		}
		if implied {
			s.report.impliedDropped++
			continue
		}
		kept = append(kept, c)
	}
	// keep those whose merged transcripts stay a prefix of the input; the
	// others are waited for only
	var merged []trace.Message
	for _, c := range kept {
		next := history.Merge(merged, nodes[c.node].transcript)
		if !hasPrefix(input, next) {
			waits = append(waits, c.node)
			continue
		}
		merged = next
		parents = append(parents, c.node)
		kinds = append(kinds, kind)
	}
	// drop waits another edge already implies: a parent, or an edge
	// (parent or other wait) that is sent after it
	var keptWaits []int
	for _, w := range waits {
		implied := slices.Contains(parents, w)
		for _, d := range slices.Concat(parents, waits) {
			if d != w && nodes[d].waitsOn[w] {
				implied = true
			}
		}
		if implied {
			s.report.impliedDropped++
			continue
		}
		keptWaits = append(keptWaits, w)
	}
	slices.Sort(keptWaits)
	// parents in the order their answers appear in the input: the merge order
	return parents, kinds, keptWaits
}

// messageTokens counts a message's text and tool calls with tok.
func messageTokens(tok tokenizer.Tokenizer, m trace.Message) int {
	n := 0
	if m.Content != "" {
		n = tok.Count(m.Content)
	}
	for _, c := range m.ToolCalls {
		n += tok.Count(c.Name) + tok.Count(c.Arguments)
	}
	return n
}

// errSpan names a span of a file in an error.
func errSpan(path, span string, err error) error {
	if span == "" {
		return fmt.Errorf("%s: %w", path, err)
	}
	return fmt.Errorf("%s: span %s: %w", path, span, err)
}

var errNoSpans = errors.New("no spans: want a span list {\"spans\": [...]} or an OTLP JSON export {\"resourceSpans\": [...]}")
