package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// AgentOptions configure an Agent source. Counts are token counts or
// numbers drawn from their distribution and rounded; ToolLatency is in
// seconds.
type AgentOptions struct {
	Corpus *Corpus
	Count  int // sessions, >= 1
	// Rounds is the tool-calling rounds of a session (>= 0): the session's
	// first request and each next one answer with tool calls until Rounds
	// are done, then one more request answers text.
	Rounds Dist
	// Width is the parallel tool calls of one round (>= 1).
	Width Dist
	// SubAgents is the parallel LLM branches a round's tool results fan
	// out to, joined by one request; 0 or 1 means none (nil: never).
	SubAgents Dist
	// SubAgentContext is how a branch and the join see each other:
	// SubAgentsShared (the default, "") or SubAgentsOwn.
	SubAgentContext string
	ResultTokens    Dist // tokens of each tool result (>= 1)
	ToolLatency     Dist // seconds each tool call runs; negative samples are 0
	InputTokens     Dist // tokens of each user message (>= 1)
	OutputTokens    Dist // tokens of each text answer (>= 1)
	SystemTokens    Dist // the session's system prompt; nil or 0 none
	Tools           int  // function definitions in every request's tools array, >= 1
	// Schedule sets session starts (Rate, Burstiness) and estimates
	// response times for open-loop arrivals (TokenTime).
	Schedule Schedule
	Seed     int64
	MaxBytes int64 // refuse an estimated trace above it; 0 no limit
}

// Agent makes synthetic agent sessions, each a dependency graph
// (trace.Turn.Parents):
//
//   - request 0: a system prompt (SystemTokens, when any) and a user
//     message (InputTokens); every request carries the same tools array of
//     Tools function definitions;
//   - each round: the previous request's reference answer is Width tool
//     calls (ReferenceToolCalls, ids "call_<turn>_<j>", tool_choice
//     "required"); the next request's Messages are their results (role
//     tool, tool_call_id matching, ResultTokens each), its parent is that
//     request and its delay is the slowest call's ToolLatency;
//   - when SubAgents draws s >= 2 for a round, the results go to s parallel
//     branch requests instead, each adding a user message of its sub-task
//     and answering text (tool_choice "none"), and one join request whose
//     parents are the s branches (its history holds all their answers) adds
//     a user message, 0 s after the last branch ended, and goes on;
//   - with SubAgentContext SubAgentsOwn a branch is a fresh context instead
//     (an agent run as a tool): its parent is RootParent, it waits for the
//     round's request (After) and its delay, and its messages are its
//     sub-task alone; the join continues the round's request (its parent)
//     with the tool results, and waits for the branches without taking
//     their answers into its history (After);
//   - after Rounds rounds the last request answers text of OutputTokens.
//
// Sessions are "agent-<i>" (zero-padded); session i draws from its own
// generator seeded by (Seed, i). Starts follow Schedule; the open-loop
// arrival of a request is the latest over its parents of (arrival +
// TokenTime x output tokens), plus its delay.
type Agent struct {
	Opts  AgentOptions
	tools string
	stats agentStats
}

type agentStats struct {
	requests, toolCalls, branches, joins int
	widthSum, rounds, after              int
}

var (
	_ Source   = (*Agent)(nil)
	_ Reporter = (*Agent)(nil)
)

// NewAgent checks o and returns the source.
func NewAgent(o AgentOptions) (*Agent, error) {
	a := &Agent{Opts: o}
	if err := a.validate(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) Name() string { return "agent" }

// Report counts what was generated.
func (a *Agent) Report() map[string]string {
	s := a.stats
	m := map[string]string{
		"sessions":           strconv.Itoa(a.Opts.Count),
		"requests":           strconv.Itoa(s.requests),
		"tool_calls":         strconv.Itoa(s.toolCalls),
		"tool_rounds":        strconv.Itoa(s.rounds),
		"sub_agent_requests": strconv.Itoa(s.branches),
		"joins":              strconv.Itoa(s.joins),
	}
	if s.after > 0 { // absent otherwise: older sessions' reports stay byte-identical
		m["edges_after"] = strconv.Itoa(s.after)
	}
	if a.Opts.Corpus != nil {
		addUTF8Report(m, reportTextInvalidUTF8, a.Opts.Corpus.InvalidUTF8())
	}
	return m
}

func (a *Agent) validate() error {
	const st = "AgentOptions"
	o := a.Opts
	if o.Corpus == nil {
		return fieldErr(st, "Corpus", "no corpus")
	}
	if o.Count <= 0 {
		return fieldErr(st, "Count", "%d sessions, want at least 1", o.Count)
	}
	if o.Tools < 1 {
		return fieldErr(st, "Tools", "%d tool definitions, want at least 1", o.Tools)
	}
	for _, c := range []struct {
		field string
		d     Dist
		lo    float64
	}{{"Rounds", o.Rounds, 0}, {"Width", o.Width, 1}, {"ResultTokens", o.ResultTokens, 1},
		{"InputTokens", o.InputTokens, 1}, {"OutputTokens", o.OutputTokens, 1}} {
		if err := checkCount(st, c.field, c.d, c.lo); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		field string
		d     Dist
	}{{"SubAgents", o.SubAgents}, {"SystemTokens", o.SystemTokens}} {
		if c.d != nil {
			if err := checkCount(st, c.field, c.d, 0); err != nil {
				return err
			}
		}
	}
	if o.ToolLatency == nil {
		return fieldErr(st, "ToolLatency", "no distribution")
	}
	switch o.SubAgentContext {
	case "", SubAgentsShared, SubAgentsOwn:
	default:
		return fieldErr(st, "SubAgentContext", "%q, want %q or %q", o.SubAgentContext, SubAgentsShared, SubAgentsOwn)
	}
	if err := o.Schedule.Validate(); err != nil {
		return err
	}
	rounds, width := distMean(o.Rounds), max(distMean(o.Width), 1)
	sub := distMean(o.SubAgents)
	perSession := distMean(o.SystemTokens) + distMean(o.InputTokens) + distMean(o.OutputTokens) +
		rounds*(width*(distMean(o.ResultTokens)+agentCallTokens)+sub*(distMean(o.InputTokens)+distMean(o.OutputTokens)))
	return checkSize(st, float64(o.Count)*perSession*o.Corpus.BytesPerToken(), o.MaxBytes,
		fmt.Sprintf("%d sessions x %.3g rounds x %.3g tool calls of %.4g result tokens", o.Count, rounds, width, distMean(o.ResultTokens)))
}

// agentCallTokens estimates one tool call's tokens (name, arguments), for
// the size estimate.
const agentCallTokens = 16

// Conversations generates the sessions with their start and arrival
// offsets.
func (a *Agent) Conversations(ctx context.Context) ([]Conversation, error) {
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("agent source: %w", err)
	}
	a.stats = agentStats{}
	a.tools = a.toolsJSON()
	width := len(strconv.Itoa(a.Opts.Count - 1))
	convs := make([]Conversation, a.Opts.Count)
	for i := range convs {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		convs[i] = a.session(i, fmt.Sprintf("agent-%0*d", width, i))
	}
	// starts as the chat schedule draws them; arrivals along the graph
	a.Opts.Schedule.Apply(convs, a.Opts.Seed)
	for _, c := range convs {
		graphArrivals(c, a.Opts.Schedule.TokenTime.Nanoseconds())
	}
	return convs, nil
}

// graphArrivals sets open-loop arrivals along a conversation's parents
// and wait-only edges (After): a root arrives at the start plus its
// delay; another node at the latest over the turns it waits for of
// (arrival + tokenTime x output tokens) plus its delay.
func graphArrivals(c Conversation, tokenTime int64) {
	for k := range c {
		t := &c[k]
		at := t.StartOffsetNs
		ps := t.Parents
		if len(ps) == 0 && k > 0 {
			ps = []int32{int32(k - 1)}
		}
		for _, p := range slices.Concat(ps, t.After) {
			if p >= 0 && int(p) < k {
				at = max(at, c[p].ArrivalOffsetNs+tokenTime*int64(c[p].OutputTokens))
			}
		}
		if k > 0 {
			at += t.ThinkTimeNs
		}
		t.ArrivalOffsetNs = at
	}
}

// toolsJSON is the tools array every request carries: Tools functions
// with corpus descriptions, drawn from a generator of their own.
func (a *Agent) toolsJSON() string {
	r := rand.New(rand.NewPCG(uint64(a.Opts.Seed), 0x7001))
	c := a.Opts.Corpus
	type fn struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	}
	type tool struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	tools := make([]tool, a.Opts.Tools)
	for i := range tools {
		tools[i] = tool{Type: "function", Function: fn{
			Name:        agentToolName(i),
			Description: strings.TrimSpace(c.Text(r.IntN(c.Tokens()), 12)),
			Parameters: map[string]any{"type": "object", "required": []string{"query"},
				"properties": map[string]any{"query": map[string]any{"type": "string"}}},
		}}
	}
	b, _ := json.Marshal(tools)
	return string(b)
}

func agentToolName(i int) string { return "tool_" + strconv.Itoa(i) }

// Tool choices as JSON text.
const (
	choiceRequired = `"required"`
	choiceNone     = `"none"`
)

// session builds one session's graph.
func (a *Agent) session(i int, id string) Conversation {
	o := &a.Opts
	r := rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)))
	c := o.Corpus
	tok := c.Tokenizer()
	pos := r.IntN(c.Tokens())
	take := func(n int) string {
		t := c.Text(pos, n)
		pos += n
		return t
	}
	var conv Conversation
	// add appends a request and returns its index (not a pointer: later
	// appends move the slice)
	add := func(parents []int32, delay int64, msgs []trace.Message) int {
		k := int32(len(conv))
		t := trace.Turn{ConversationID: id, Turn: k, ThinkTimeNs: delay, Messages: msgs, Tools: a.tools}
		if k > 0 {
			t.Parents = parents
		}
		for _, m := range msgs {
			t.InputTokens += m.Tokens
		}
		conv = append(conv, t)
		a.stats.requests++
		return int(k)
	}
	user := func(prefix string) trace.Message {
		n := max(sampleInt(o.InputTokens, r), 1)
		text := take(n)
		if prefix != "" {
			text = prefix + text
			n = tok.Count(text)
		}
		return trace.Message{Role: "user", Content: text, Tokens: int32(n)}
	}
	// answerText makes t answer text; answerCalls makes it call w tools
	// and returns the calls.
	answerText := func(k int) {
		t := &conv[k]
		n := max(sampleInt(o.OutputTokens, r), 1)
		t.ReferenceAnswer = c.Text(r.IntN(c.Tokens()), n)
		t.OutputTokens = int32(n)
		t.ToolChoice = choiceNone
	}
	answerCalls := func(k int) []trace.ToolCall {
		t := &conv[k]
		w := max(sampleInt(o.Width, r), 1)
		calls := make([]trace.ToolCall, w)
		n := 0
		for j := range calls {
			args, _ := json.Marshal(map[string]string{"query": strings.TrimSpace(c.Text(r.IntN(c.Tokens()), 6))})
			calls[j] = trace.ToolCall{ID: fmt.Sprintf("call_%d_%d", t.Turn, j), Name: agentToolName(r.IntN(o.Tools)), Arguments: string(args)}
			n += tok.Count(calls[j].Name) + tok.Count(calls[j].Arguments)
		}
		t.ReferenceToolCalls = calls
		t.OutputTokens = int32(max(n, 1))
		t.ToolChoice = choiceRequired
		a.stats.toolCalls += w
		a.stats.widthSum += w
		a.stats.rounds++
		return calls
	}
	var first []trace.Message
	if o.SystemTokens != nil {
		if n := sampleInt(o.SystemTokens, r); n > 0 {
			first = append(first, trace.Message{Role: "system", Content: take(n), Tokens: int32(n)})
		}
	}
	first = append(first, user(""))
	rounds := sampleInt(o.Rounds, r)
	cur := add(nil, 0, first)
	if rounds == 0 {
		answerText(cur)
		return conv
	}
	calls := answerCalls(cur)
	for round := 1; round <= rounds; round++ {
		last := round == rounds
		parent := int32(cur)
		var delay float64
		results := make([]trace.Message, len(calls))
		for j, call := range calls {
			delay = max(delay, o.ToolLatency.Sample(r))
			n := max(sampleInt(o.ResultTokens, r), 1)
			results[j] = trace.Message{Role: "tool", ToolCallID: call.ID, Content: take(n), Tokens: int32(n)}
		}
		delayNs := int64(math.Round(max(delay, 0) * 1e9))
		sub := 0
		if o.SubAgents != nil {
			sub = sampleInt(o.SubAgents, r)
		}
		switch {
		case sub >= 2 && o.SubAgentContext == SubAgentsOwn:
			branches := make([]int32, sub)
			for b := range branches {
				k := add([]int32{trace.RootParent}, delayNs, []trace.Message{user(fmt.Sprintf(" Sub-task %d of %d.", b+1, sub))})
				conv[k].After = []int32{parent}
				a.stats.after++
				answerText(k)
				branches[b] = int32(k)
				a.stats.branches++
			}
			cur = add([]int32{parent}, 0, results)
			conv[cur].After = branches
			a.stats.after += len(branches)
			a.stats.joins++
		case sub >= 2:
			branches := make([]int32, sub)
			for b := range branches {
				msgs := append(append([]trace.Message(nil), results...), user(fmt.Sprintf(" Sub-task %d of %d.", b+1, sub)))
				k := add([]int32{parent}, delayNs, msgs)
				answerText(k)
				branches[b] = int32(k)
				a.stats.branches++
			}
			cur = add(branches, 0, []trace.Message{user(" Combine the findings.")})
			a.stats.joins++
		default:
			cur = add([]int32{parent}, delayNs, results)
		}
		if last {
			answerText(cur)
		} else {
			calls = answerCalls(cur)
		}
	}
	return conv
}

// AgentOptions.SubAgentContext values.
const (
	SubAgentsShared = "shared" // branches take the round's history; the join merges theirs
	SubAgentsOwn    = "own"    // branches start fresh; the join waits for them (After)
)

// Defaults of the agent source's flags.
const (
	DefaultAgentRounds       = "1-4"
	DefaultAgentWidth        = "1-3"
	DefaultAgentResultTokens = "50-400"
	DefaultAgentToolLatency  = "exponential:mean=500ms"
	DefaultAgentSystemTokens = "300"
)
