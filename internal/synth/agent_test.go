package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/trace"
)

func agentOptions(t *testing.T) AgentOptions {
	t.Helper()
	d := func(spec string, u Unit) Dist {
		v, err := ParseDist(spec, u)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return AgentOptions{
		Corpus: importCorpus(t), Count: 400, Seed: 3, Tools: 4,
		Rounds: d("2-6", Count), Width: d("1-4", Count), SubAgents: d("0", Count),
		ResultTokens: d("20-60", Count), ToolLatency: d("1s-3s", Seconds),
		InputTokens: d("10-20", Count), OutputTokens: d("5-15", Count), SystemTokens: d("30", Count),
		Schedule: Schedule{Rate: 2, Burstiness: 1, TokenTime: 10 * time.Millisecond},
	}
}

func agentConvs(t *testing.T, o AgentOptions) []Conversation {
	t.Helper()
	a, err := NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	convs, err := a.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return convs
}

// children lists, for each turn, the turns that name it as a parent.
func children(c Conversation) [][]int {
	out := make([][]int, len(c))
	for k := range c {
		for _, p := range parentsOf(c, k) {
			out[p] = append(out[p], k)
		}
	}
	return out
}

// checkAgentSession asserts the structure every session has: parents are
// earlier turns; a tool-calling turn's children start with one result per
// call, ids matching in order, sent the slowest call's latency after it;
// every turn without children answers text.
func checkAgentSession(t *testing.T, c Conversation, tok func(string) int, latMin, latMax time.Duration) {
	t.Helper()
	kids := children(c)
	for k, turn := range c {
		for _, p := range turn.Parents {
			if p < 0 || int(p) >= k {
				t.Fatalf("%s turn %d: parent %d", turn.ConversationID, k, p)
			}
		}
		if turn.Tools == "" || turn.InputTokens <= 0 || turn.OutputTokens <= 0 {
			t.Fatalf("%s turn %d: tools %q, %d input, %d output tokens", turn.ConversationID, k, turn.Tools, turn.InputTokens, turn.OutputTokens)
		}
		for _, m := range turn.Messages {
			if int(m.Tokens) != tok(m.Content) {
				t.Fatalf("%s turn %d: a %s message of %d tokens says %d", turn.ConversationID, k, m.Role, tok(m.Content), m.Tokens)
			}
		}
		calls := turn.ReferenceToolCalls
		if len(calls) == 0 {
			if turn.ReferenceAnswer == "" || turn.ToolChoice != `"none"` {
				t.Fatalf("%s turn %d: neither tool calls nor text", turn.ConversationID, k)
			}
			continue
		}
		if turn.ToolChoice != `"required"` || turn.ReferenceAnswer != "" {
			t.Fatalf("%s turn %d: tool calls with tool_choice %s, text %q", turn.ConversationID, k, turn.ToolChoice, turn.ReferenceAnswer)
		}
		if len(kids[k]) == 0 {
			t.Fatalf("%s turn %d: tool calls nobody answers", turn.ConversationID, k)
		}
		for _, ch := range kids[k] {
			msgs := c[ch].Messages
			if len(msgs) < len(calls) {
				t.Fatalf("%s turn %d: %d messages for %d calls", turn.ConversationID, ch, len(msgs), len(calls))
			}
			for j, call := range calls {
				if msgs[j].Role != "tool" || msgs[j].ToolCallID != call.ID {
					t.Fatalf("%s turn %d message %d: %s %q, want the result of %s", turn.ConversationID, ch, j, msgs[j].Role, msgs[j].ToolCallID, call.ID)
				}
			}
			if d := time.Duration(c[ch].ThinkTimeNs); d < latMin || d > latMax {
				t.Fatalf("%s turn %d: delay %v outside the tool latency %v-%v", turn.ConversationID, ch, d, latMin, latMax)
			}
		}
	}
	if last := c[len(c)-1]; len(kids[len(c)-1]) != 0 || last.ReferenceAnswer == "" {
		t.Fatalf("%s: the last turn does not end the session with text", last.ConversationID)
	}
}

func TestAgentStructureAndDistributions(t *testing.T) {
	o := agentOptions(t)
	convs := agentConvs(t, o)
	tok := o.Corpus.Tokenizer().Count
	var rounds, widths, calls, results []float64
	var maxLat []float64
	for _, c := range convs {
		checkAgentSession(t, c, tok, time.Second, 3*time.Second)
		r := 0
		for k, turn := range c {
			if w := len(turn.ReferenceToolCalls); w > 0 {
				r++
				widths = append(widths, float64(w))
				calls = append(calls, float64(w))
			}
			for _, m := range turn.Messages {
				if m.Role == "tool" {
					results = append(results, float64(m.Tokens))
				}
			}
			if k > 0 {
				maxLat = append(maxLat, time.Duration(turn.ThinkTimeNs).Seconds())
			}
			if len(turn.Parents) > 1 {
				t.Fatalf("a join without sub-agents")
			}
		}
		if len(c) != r+1 {
			t.Fatalf("%s: %d turns for %d rounds", c[0].ConversationID, len(c), r)
		}
		rounds = append(rounds, float64(r))
		if c[0].Messages[0].Role != "system" || c[0].Messages[0].Tokens != 30 {
			t.Fatalf("no system prompt of 30 tokens: %+v", c[0].Messages[0])
		}
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	lo, hi := slices.Min(rounds), slices.Max(rounds)
	if lo != 2 || hi != 6 || math.Abs(mean(rounds)-4) > 0.25 {
		t.Errorf("rounds in [%g, %g] mean %.3f, want 2-6 mean 4", lo, hi, mean(rounds))
	}
	if slices.Min(widths) != 1 || slices.Max(widths) != 4 || math.Abs(mean(widths)-2.5) > 0.1 {
		t.Errorf("width in [%g, %g] mean %.3f, want 1-4 mean 2.5", slices.Min(widths), slices.Max(widths), mean(widths))
	}
	if slices.Min(results) < 20 || slices.Max(results) > 60 || math.Abs(mean(results)-40) > 1 {
		t.Errorf("result tokens in [%g, %g] mean %.3f, want 20-60 mean 40", slices.Min(results), slices.Max(results), mean(results))
	}
	// the slowest of w uniform(1, 3) latencies: mean 1 + 2 w/(w+1), so above
	// the 2 s of one call on average
	if m := mean(maxLat); m < 2.3 || m > 2.8 {
		t.Errorf("mean delay %.3f s, want the slowest call's (about 2.5 s for 1-4 calls)", m)
	}
	// sessions start on the --rate schedule: 2/s
	span := time.Duration(convs[len(convs)-1][0].StartOffsetNs)
	if rate := float64(len(convs)-1) / span.Seconds(); rate < 1.7 || rate > 2.3 {
		t.Errorf("session rate %.2f/s, want about 2", rate)
	}
}

func TestAgentSubAgentJoins(t *testing.T) {
	o := agentOptions(t)
	o.Count = 60
	var err error
	if o.SubAgents, err = ParseDist("2-4", Count); err != nil {
		t.Fatal(err)
	}
	if o.ToolLatency, err = ParseDist("2s", Seconds); err != nil {
		t.Fatal(err)
	}
	convs := agentConvs(t, o)
	joins := 0
	for _, c := range convs {
		checkAgentSession(t, c, o.Corpus.Tokenizer().Count, 2*time.Second, 2*time.Second)
		done := Transcripts(c)
		for k, turn := range c {
			if len(turn.Parents) < 2 {
				continue
			}
			joins++
			if len(turn.Parents) > 4 || turn.ThinkTimeNs != 0 {
				t.Fatalf("join of %d branches, delay %d", len(turn.Parents), turn.ThinkTimeNs)
			}
			// all branches share one parent, and the join's history holds
			// every branch's answer after the shared results
			hist := HistoryOf(c, done, k)
			shared := c[turn.Parents[0]].Parents
			for _, b := range turn.Parents {
				if !slices.Equal(c[b].Parents, shared) || c[b].ReferenceAnswer == "" {
					t.Fatalf("branch %d: parents %v (others %v)", b, c[b].Parents, shared)
				}
				found := slices.ContainsFunc(hist, func(m trace.Message) bool {
					return m.Role == "assistant" && m.Content == c[b].ReferenceAnswer
				})
				if !found {
					t.Fatalf("join %d: branch %d's answer missing from its history", k, b)
				}
			}
			tools := 0
			for _, m := range hist {
				if m.Role == "tool" {
					tools++
				}
			}
			if want := len(c[shared[0]].ReferenceToolCalls); tools < want {
				t.Fatalf("join %d: %d tool results in history, the fan-out had %d calls", k, tools, want)
			}
		}
	}
	if joins < len(convs)*2 {
		t.Errorf("%d joins over %d sessions of 2-6 rounds", joins, len(convs))
	}
}

func TestAgentDeterministic(t *testing.T) {
	o := agentOptions(t)
	o.Count = 20
	a, b := agentConvs(t, o), agentConvs(t, o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different sessions")
	}
	// session i does not change when Count grows
	o.Count = 30
	c := agentConvs(t, o)
	if !reflect.DeepEqual(a[5], c[5]) {
		t.Error("the sixth session changed with Count")
	}
	o.Seed = 4
	if reflect.DeepEqual(agentConvs(t, o)[0], c[0]) {
		t.Error("another seed gave the same session")
	}
}

func TestAgentBadOptions(t *testing.T) {
	for field, mut := range map[string]func(*AgentOptions){
		"Width":           func(o *AgentOptions) { o.Width = Constant{V: 0} },
		"Count":           func(o *AgentOptions) { o.Count = 0 },
		"Tools":           func(o *AgentOptions) { o.Tools = 0 },
		"ToolLatency":     func(o *AgentOptions) { o.ToolLatency = nil },
		"Burstiness":      func(o *AgentOptions) { o.Schedule.Burstiness = -1 },
		"MaxBytes":        func(o *AgentOptions) { o.MaxBytes = 1000 },
		"SubAgentContext": func(o *AgentOptions) { o.SubAgentContext = "forked" },
	} {
		o := agentOptions(t)
		mut(&o)
		_, err := NewAgent(o)
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// Open-loop arrivals wait along After edges as along parents.
func TestGraphArrivalsAfter(t *testing.T) {
	c := Conversation{
		{Turn: 0, StartOffsetNs: 100, OutputTokens: 10},
		{Turn: 1, StartOffsetNs: 100, Parents: []int32{trace.RootParent}, ThinkTimeNs: 7},
		{Turn: 2, StartOffsetNs: 100, Parents: []int32{trace.RootParent}, After: []int32{0}, ThinkTimeNs: 5},
	}
	graphArrivals(c, 2)
	if c[0].ArrivalOffsetNs != 100 || c[1].ArrivalOffsetNs != 107 || c[2].ArrivalOffsetNs != 100+20+5 {
		t.Errorf("arrivals %d %d %d, want 100, 107 (a root) and 125 (after turn 0's 10 tokens at 2 ns, then 5)",
			c[0].ArrivalOffsetNs, c[1].ArrivalOffsetNs, c[2].ArrivalOffsetNs)
	}
}

// With SubAgentContext SubAgentsOwn a branch starts a fresh context
// (parent RootParent) holding only its sub-task and waits for the round's
// request (After) plus the tool latency; the join continues the round's
// request with one result per call, 0 s after the last branch, and waits
// for the branches without taking their answers into its history.
func TestAgentSubAgentsOwnContext(t *testing.T) {
	o := agentOptions(t)
	o.Count = 60
	o.SubAgentContext = SubAgentsOwn
	var err error
	if o.SubAgents, err = ParseDist("2-4", Count); err != nil {
		t.Fatal(err)
	}
	if o.ToolLatency, err = ParseDist("2s", Seconds); err != nil {
		t.Fatal(err)
	}
	a, err := NewAgent(o)
	if err != nil {
		t.Fatal(err)
	}
	convs, err := a.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	joins, after := 0, 0
	for _, c := range convs {
		done := Transcripts(c)
		for k, turn := range c {
			after += len(turn.After)
			if len(turn.After) < 2 {
				continue
			}
			joins++
			if len(turn.Parents) != 1 || turn.ThinkTimeNs != 0 {
				t.Fatalf("join %d: parents %v, delay %d", k, turn.Parents, turn.ThinkTimeNs)
			}
			round := c[turn.Parents[0]]
			calls := round.ReferenceToolCalls
			if len(turn.Messages) != len(calls) {
				t.Fatalf("join %d: %d messages for %d calls", k, len(turn.Messages), len(calls))
			}
			for j, call := range calls {
				if m := turn.Messages[j]; m.Role != "tool" || m.ToolCallID != call.ID {
					t.Fatalf("join %d message %d: %s %q, want the result of %s", k, j, m.Role, m.ToolCallID, call.ID)
				}
			}
			hist := HistoryOf(c, done, k)
			for _, b := range turn.After {
				br := c[b]
				if !slices.Equal(br.Parents, []int32{trace.RootParent}) || !slices.Equal(br.After, turn.Parents) {
					t.Fatalf("branch %d of join %d: parents %v after %v, want [%d] and %v", b, k, br.Parents, br.After, trace.RootParent, turn.Parents)
				}
				if len(br.Messages) != 1 || br.Messages[0].Role != "user" || br.ReferenceAnswer == "" || br.ThinkTimeNs != int64(2*time.Second) {
					t.Fatalf("branch %d: messages %+v, answer %q, delay %d", b, br.Messages, br.ReferenceAnswer, br.ThinkTimeNs)
				}
				if h := HistoryOf(c, done, int(b)); len(h) != 0 {
					t.Fatalf("branch %d: a fresh context has history %+v", b, h)
				}
				if slices.ContainsFunc(hist, func(m trace.Message) bool { return m.Content == br.ReferenceAnswer }) {
					t.Fatalf("join %d: branch %d's answer is in its history", k, b)
				}
				// Open loop: after the round's answer and the tool latency.
				if want := round.ArrivalOffsetNs + o.Schedule.TokenTime.Nanoseconds()*int64(round.OutputTokens) + br.ThinkTimeNs; br.ArrivalOffsetNs != want {
					t.Fatalf("branch %d arrives at %d, want %d", b, br.ArrivalOffsetNs, want)
				}
			}
		}
	}
	if joins < len(convs)*2 {
		t.Errorf("%d joins over %d sessions of 2-6 rounds", joins, len(convs))
	}
	if got := a.Report()["edges_after"]; got != fmt.Sprint(after) {
		t.Errorf("report edges_after %s, the sessions hold %d", got, after)
	}
}
