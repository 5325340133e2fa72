package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

const searchTool = `[{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]`

// gturn is turn k of conversation id with the given parents and messages.
func gturn(id string, k int32, parents []int32, think time.Duration, msgs ...trace.Message) trace.Turn {
	if len(msgs) == 0 {
		msgs = []trace.Message{{Role: "user", Content: fmt.Sprintf("step %d of %s", k, id), Tokens: 4}}
	}
	return trace.Turn{ConversationID: id, Turn: k, Parents: parents, ThinkTimeNs: int64(think),
		Messages: msgs, OutputTokens: 3}
}

// bodyMessages is the messages array the mock received for request id.
type bodyMessage struct {
	Role      string  `json:"role"`
	Content   *string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

func received(t *testing.T, srv *mock.Server, id string) (mock.LogEntry, []bodyMessage) {
	t.Helper()
	for _, e := range srv.Log() {
		if e.RequestID == id {
			var b struct{ Messages []bodyMessage }
			if err := json.Unmarshal(e.Body, &b); err != nil {
				t.Fatalf("%s: body %s: %v", id, e.Body, err)
			}
			return e, b.Messages
		}
	}
	t.Fatalf("the mock never received %s", id)
	return mock.LogEntry{}, nil
}

func content(m bodyMessage) string {
	if m.Content == nil {
		return "<null>"
	}
	return *m.Content
}

// A 4-way fan-out and a join against the mock. The join
// is sent only after all four answers, exactly its delay after the last
// one's done time, with all four in its history; the root's tool call
// (the mock answers tool_choice required) reaches the branches with the
// trace's call id and the live arguments; a failed branch (a model the
// strict mock refuses) fails only its descendants, recorded as
// parent_failed without traffic, while its sibling goes on; a live answer
// whose tool calls differ from the trace's is counted and replaced by the
// recorded message in the child's history.
func TestGraphFanOutJoin(t *testing.T) {
	var seed int64
	srv := mocktest.Start(t, func(c *mock.Config) { c.StrictModel = true; seed = c.Seed })
	const think = 3 * time.Millisecond
	root := gturn("g", 0, nil, 0,
		trace.Message{Role: "system", Content: "You are an agent.", Tokens: 4},
		trace.Message{Role: "user", Content: "find four things", Tokens: 3})
	root.Tools, root.ToolChoice = searchTool, `"required"`
	root.ReferenceToolCalls = []trace.ToolCall{{ID: "call_r0", Name: "search", Arguments: `{"q":"x"}`}}
	g := []trace.Turn{root}
	for k := int32(1); k <= 4; k++ {
		g = append(g, gturn("g", k, []int32{0}, think, trace.Message{Role: "tool", Content: fmt.Sprintf("result %d", k), ToolCallID: "call_r0", Tokens: 2}))
	}
	g = append(g, gturn("g", 5, []int32{1, 2, 3, 4}, think))

	// f: 0 -> {1 (refused), 2}; 3 <- 1; 4 <- 3 and 2; 5 <- 2.
	f := []trace.Turn{gturn("f", 0, nil, 0), gturn("f", 1, []int32{0}, think), gturn("f", 2, []int32{0}, think),
		gturn("f", 3, []int32{1}, think), gturn("f", 4, []int32{2, 3}, think), gturn("f", 5, []int32{2}, think)}
	f[1].Model = "no-such-model"

	// m: the trace's answer has two calls; the mock answers one.
	m := []trace.Turn{gturn("m", 0, []int32{trace.RootParent}, think), gturn("m", 1, []int32{0}, think)}
	m[0].Tools, m[0].ToolChoice, m[0].ReferenceAnswer = searchTool, `"required"`, "let me look"
	m[0].ReferenceToolCalls = []trace.ToolCall{{ID: "call_a", Name: "search", Arguments: `{}`}, {ID: "call_b", Name: "search", Arguments: `{"p":2}`}}

	sink, res := run(t, Config{Trace: writeTrace(t, g, f, m), Targets: []string{srv.URL()}, IgnoreEOS: true, MaxConcurrency: 8})
	recs := sink.byID()
	if len(recs) != len(g)+len(f)+len(m) {
		t.Fatalf("%d records, want %d: %v", len(recs), len(g)+len(f)+len(m), recs)
	}

	// The join waited for all four branches, then exactly its delay.
	join := recs["g-5-0"]
	var last int64
	for k := 1; k <= 4; k++ {
		b := recs[fmt.Sprintf("g-%d-0", k)]
		if b.ErrorKind != "" {
			t.Fatalf("branch %d: %s %s", k, b.ErrorKind, b.ErrorMessage)
		}
		if b.IntendedNs != recs["g-0-0"].DoneNs+int64(think) {
			t.Errorf("branch %d intended %d, want the root's done %d + %d", k, b.IntendedNs, recs["g-0-0"].DoneNs, think)
		}
		last = max(last, b.DoneNs)
	}
	if join.ErrorKind != "" || join.IntendedNs != last+int64(think) || join.SentNs < join.IntendedNs {
		t.Fatalf("join: %s, intended %d sent %d, want intended = last branch done %d + %d", join.ErrorKind, join.IntendedNs, join.SentNs, last, think)
	}
	if fmt.Sprint(join.Parents) != "[1 2 3 4]" || recs["g-1-0"].ToolCalls != 0 || recs["g-0-0"].ToolCalls != 1 || recs["g-0-0"].ToolCallMismatch {
		t.Errorf("graph columns: join parents %v, root tool calls %d mismatch %v", join.Parents, recs["g-0-0"].ToolCalls, recs["g-0-0"].ToolCallMismatch)
	}
	// Its history: the shared root transcript once, then each branch's
	// message and the mock's answer to it, in the order listed.
	_, jm := received(t, srv, "g-5-0")
	var roles []string
	for _, x := range jm {
		roles = append(roles, x.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,assistant,tool,assistant,tool,assistant,tool,assistant,user" {
		t.Fatalf("join history roles %s", got)
	}
	for k := 1; k <= 4; k++ {
		e, _ := received(t, srv, fmt.Sprintf("g-%d-0", k))
		want, _ := mock.GeneratedText(seed, e.MessagesHash, int(e.CompletionTokens))
		if tool, ans := jm[2*k+1], jm[2*k+2]; content(tool) != fmt.Sprintf("result %d", k) || content(ans) != want {
			t.Errorf("join history for branch %d: %q then %q, want the mock's answer %q", k, content(tool), content(ans), want)
		}
	}
	// The tool-call round trip: the branch carries the live call under the
	// trace's id, its tool message answering it.
	_, bm := received(t, srv, "g-2-0")
	a := bm[2]
	if len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != "call_r0" || a.ToolCalls[0].Function.Name != "search" ||
		!strings.HasPrefix(a.ToolCalls[0].Function.Arguments, `{"text": "`) || bm[3].ToolCallID != "call_r0" {
		t.Fatalf("branch history %+v", bm)
	}

	// A failed branch fails only its descendants.
	if r := recs["f-1-0"]; r.ErrorKind != trace.ErrHTTPStatus {
		t.Fatalf("f-1: %s %s", r.ErrorKind, r.ErrorMessage)
	}
	for _, id := range []string{"f-3-0", "f-4-0"} {
		r := recs[id]
		if r.ErrorKind != trace.ErrParentFailed || r.Status != 0 || len(r.EventNs) != 0 {
			t.Errorf("%s: %s %q", id, r.ErrorKind, r.ErrorMessage)
		}
		for _, e := range srv.Log() {
			if e.RequestID == id {
				t.Errorf("%s reached the server", id)
			}
		}
	}
	if msg := recs["f-3-0"].ErrorMessage; !strings.Contains(msg, "f-1-0") || !strings.Contains(msg, "http_status") {
		t.Errorf("f-3 message %q should name f-1-0 and http_status", msg)
	}
	if msg := recs["f-4-0"].ErrorMessage; !strings.Contains(msg, "f-3-0") || !strings.Contains(msg, "parent_failed") {
		t.Errorf("f-4 message %q should name f-3-0 and parent_failed", msg)
	}
	for _, id := range []string{"f-0-0", "f-2-0", "f-5-0"} {
		if r := recs[id]; r.ErrorKind != "" {
			t.Errorf("%s: %s %s", id, r.ErrorKind, r.ErrorMessage)
		}
	}

	// The mismatch: counted, and the recorded message goes on.
	if !recs["m-0-0"].ToolCallMismatch || recs["m-0-0"].ToolCalls != 1 || res.ToolCallMismatches != 1 || res.ParentFailed != 2 {
		t.Errorf("mismatch %v (%d calls); result %d mismatches, %d parent_failed", recs["m-0-0"].ToolCallMismatch, recs["m-0-0"].ToolCalls, res.ToolCallMismatches, res.ParentFailed)
	}
	if recs["m-0-0"].IntendedNs != int64(think) {
		t.Errorf("a RootParent node is intended its delay after the start: %d", recs["m-0-0"].IntendedNs)
	}
	_, mm := received(t, srv, "m-1-0")
	if a := mm[1]; content(a) != "let me look" || len(a.ToolCalls) != 2 || a.ToolCalls[0].ID != "call_a" || a.ToolCalls[1].Function.Arguments != `{"p":2}` {
		t.Errorf("m-1 history %+v", mm)
	}
	if res.Errors != 1 || res.Sent != int64(len(recs)-2) {
		t.Errorf("result: %d sent, %d errors", res.Sent, res.Errors)
	}
}

// Open loop: every node at its own arrival offset, with its parents'
// reference transcripts merged as history.
func TestGraphOpenLoop(t *testing.T) {
	srv := mocktest.Start(t, nil)
	g := []trace.Turn{gturn("o", 0, nil, 0), gturn("o", 1, []int32{0}, 0), gturn("o", 2, []int32{0}, 0), gturn("o", 3, []int32{2, 1}, 0)}
	for k := range g {
		g[k].ArrivalOffsetNs = int64(k) * int64(2*time.Millisecond)
		g[k].ReferenceAnswer = fmt.Sprintf("ref %d", k)
	}
	g[2].ArrivalOffsetNs = g[1].ArrivalOffsetNs - 1 // sent before turn 1
	sink, _ := run(t, Config{Trace: writeTrace(t, g), Targets: []string{srv.URL()}, Timing: TimingTrace})
	recs := sink.byID()
	for k := range g {
		if r := recs[fmt.Sprintf("o-%d-0", k)]; r.ErrorKind != "" || r.IntendedNs != g[k].ArrivalOffsetNs {
			t.Errorf("turn %d: %s, intended %d want %d", k, r.ErrorKind, r.IntendedNs, g[k].ArrivalOffsetNs)
		}
	}
	_, jm := received(t, srv, "o-3-0")
	var got []string
	for _, m := range jm {
		got = append(got, m.Role+":"+content(m))
	}
	want := "user:step 0 of o|assistant:ref 0|user:step 2 of o|assistant:ref 2|user:step 1 of o|assistant:ref 1|user:step 3 of o"
	if strings.Join(got, "|") != want {
		t.Errorf("join history\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
}

// --max-requests and --duration stop graphs cleanly: the run returns, no
// node is recorded as parent_failed because the run stopped, and every
// sent request is recorded once.
func TestGraphLimits(t *testing.T) {
	srv := mocktest.Start(t, nil)
	var convs [][]trace.Turn
	for c := range 6 {
		id := fmt.Sprintf("L%d", c)
		g := []trace.Turn{gturn(id, 0, nil, 0)}
		for k := int32(1); k <= 4; k++ {
			g = append(g, gturn(id, k, []int32{0}, time.Millisecond))
		}
		g = append(g, gturn(id, 5, []int32{1, 2, 3, 4}, time.Millisecond))
		for k := range g {
			g[k].StartOffsetNs = int64(c) * int64(time.Millisecond)
		}
		convs = append(convs, g)
	}
	path := writeTrace(t, convs...)
	for _, cfg := range []Config{
		{Trace: path, Targets: []string{srv.URL()}, MaxRequests: 9, MaxConcurrency: 3},
		{Trace: path, Targets: []string{srv.URL()}, Duration: 15 * time.Millisecond, MaxConcurrency: 2},
	} {
		sink, res := run(t, cfg)
		recs := sink.Records()
		if cfg.MaxRequests > 0 && (len(recs) != cfg.MaxRequests || res.Sent != int64(cfg.MaxRequests)) {
			t.Errorf("max-requests %d: %d records, %d sent", cfg.MaxRequests, len(recs), res.Sent)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if r.ErrorKind == trace.ErrParentFailed || seen[r.RequestID] {
				t.Errorf("%+v: %s %s (twice: %v)", cfg, r.RequestID, r.ErrorKind, seen[r.RequestID])
			}
			seen[r.RequestID] = true
		}
		if int64(len(recs)) != res.Sent || res.ParentFailed != 0 {
			t.Errorf("%+v: %d records for %d sent, %d parent_failed", cfg, len(recs), res.Sent, res.ParentFailed)
		}
	}
	// Ctrl-C: the run's context ends while the branches are in flight (a
	// slow mock, canceled once the six roots are done); they are recorded
	// canceled, their joins are not sent. Each answer takes 0.6 s, so the
	// cancel lands while the branches stream even on a loaded machine.
	slow := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(200 * time.Millisecond) })
	r, err := New(Config{Trace: path, Targets: []string{slow.URL()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for r.Stats().Done < 6 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
		cancel()
	}()
	sink := &memSink{}
	res, err := r.Run(ctx, sink)
	if err != nil || res.Canceled == "" {
		t.Fatalf("canceled run: %v, %+v", err, res)
	}
	canceled := 0
	for _, rec := range sink.Records() {
		if rec.ErrorKind == trace.ErrParentFailed {
			t.Errorf("%s recorded as parent_failed after the run was canceled", rec.RequestID)
		}
		if rec.ErrorKind == trace.ErrCanceled {
			canceled++
		}
	}
	if canceled == 0 || int64(len(sink.Records())) != res.Sent {
		t.Errorf("canceled run: %d canceled of %d records, %d sent", canceled, len(sink.Records()), res.Sent)
	}
}

// Wait-only edges (Turn.After): a node waits for its After turns as for
// its parents, ThinkTimeNs after the latest done time, but its history
// holds none of their transcripts; a failed After turn (a refused model)
// or one recorded parent_failed does not stop it; the records carry the
// edge. Open loop keeps the arrival offsets.
func TestGraphAfter(t *testing.T) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.StrictModel = true })
	const think = 3 * time.Millisecond
	after := func(tu trace.Turn, a ...int32) trace.Turn { tu.After = a; return tu }
	// w: 0; 1 <- 0; 2 is a root that waits for 1 (an agent that rewrote
	// its context around 1's answer).
	w := []trace.Turn{gturn("w", 0, nil, 0), gturn("w", 1, []int32{0}, think),
		after(gturn("w", 2, []int32{trace.RootParent}, think), 1)}
	// x: 0; 1 <- 0 refused; 2 <- 0 waits for 1; 3 <- 1 (parent_failed);
	// 4 <- 0 waits for 3.
	x := []trace.Turn{gturn("x", 0, nil, 0), gturn("x", 1, []int32{0}, think),
		after(gturn("x", 2, []int32{0}, think), 1), gturn("x", 3, []int32{1}, think),
		after(gturn("x", 4, []int32{0}, think), 3)}
	x[1].Model = "no-such-model"

	sink, _ := run(t, Config{Trace: writeTrace(t, w, x), Targets: []string{srv.URL()}, IgnoreEOS: true, MaxConcurrency: 8})
	recs := sink.byID()
	if len(recs) != len(w)+len(x) {
		t.Fatalf("%d records, want %d", len(recs), len(w)+len(x))
	}
	w1, w2 := recs["w-1-0"], recs["w-2-0"]
	if w2.ErrorKind != "" || w2.IntendedNs != w1.DoneNs+int64(think) || w2.SentNs < w1.DoneNs {
		t.Fatalf("w-2: %s, intended %d sent %d; want intended = w-1 done %d + %d", w2.ErrorKind, w2.IntendedNs, w2.SentNs, w1.DoneNs, think)
	}
	if fmt.Sprint(w2.After, w2.Parents) != "[1] [-1]" || len(w1.After) != 0 {
		t.Errorf("w-2 edges recorded: after %v parents %v; w-1 after %v", w2.After, w2.Parents, w1.After)
	}
	if _, m := received(t, srv, "w-2-0"); len(m) != 1 || m[0].Role != "user" || content(m[0]) != "step 2 of w" {
		t.Errorf("w-2 history took a transcript it only waits for: %+v", m)
	}

	x0, x1, x2, x3, x4 := recs["x-0-0"], recs["x-1-0"], recs["x-2-0"], recs["x-3-0"], recs["x-4-0"]
	if x1.ErrorKind != trace.ErrHTTPStatus || x3.ErrorKind != trace.ErrParentFailed {
		t.Fatalf("x-1 %s, x-3 %s: want http_status and parent_failed", x1.ErrorKind, x3.ErrorKind)
	}
	if x2.ErrorKind != "" || x2.IntendedNs != max(x0.DoneNs, x1.DoneNs)+int64(think) {
		t.Errorf("x-2 waits for the failed x-1: %s, intended %d, want %d", x2.ErrorKind, x2.IntendedNs, max(x0.DoneNs, x1.DoneNs)+int64(think))
	}
	if x4.ErrorKind != "" || x4.IntendedNs != max(x0.DoneNs, x3.DoneNs)+int64(think) || x4.IntendedNs < x1.DoneNs {
		t.Errorf("x-4 waits for the not-sent x-3: %s, intended %d, want %d", x4.ErrorKind, x4.IntendedNs, max(x0.DoneNs, x3.DoneNs)+int64(think))
	}
	if _, m := received(t, srv, "x-2-0"); len(m) != 3 || m[1].Role != "assistant" || content(m[2]) != "step 2 of x" {
		t.Errorf("x-2 history is not its parent's transcript: %+v", m)
	}

	// Open loop: at the arrival offsets, before the waited turn is done.
	o := []trace.Turn{gturn("o", 0, nil, 0), after(gturn("o", 1, []int32{trace.RootParent}, 0), 0)}
	o[0].OutputTokens, o[1].ArrivalOffsetNs = 40, int64(time.Millisecond)
	sink, _ = run(t, Config{Trace: writeTrace(t, o), Targets: []string{srv.URL()}, IgnoreEOS: true, Timing: TimingTrace})
	recs = sink.byID()
	if o1 := recs["o-1-0"]; o1.ErrorKind != "" || o1.IntendedNs != int64(time.Millisecond) || o1.IntendedNs >= recs["o-0-0"].DoneNs {
		t.Errorf("open loop o-1: %s intended %d, want %d (before o-0's done %d)", o1.ErrorKind, o1.IntendedNs, time.Millisecond, recs["o-0-0"].DoneNs)
	}
}

// With MockHints the mock answers the tool calls the trace recorded (count
// and names, even names outside the request's tools, and a text answer
// where tool_choice says required), so nothing mismatches and the child's
// history holds the live calls under the trace's ids; without, the same
// trace mismatches on both turns. A turn without a reference answer gets
// no hint.
func TestGraphMockHints(t *testing.T) {
	srv := mocktest.Start(t, nil)
	conv := func(id string) []trace.Turn {
		c := []trace.Turn{gturn(id, 0, nil, 0), gturn(id, 1, []int32{0}, 0), gturn(id, 2, []int32{1}, 0), gturn(id, 3, []int32{2}, 0)}
		c[0].Tools, c[0].ToolChoice = searchTool, `"auto"`
		c[0].ReferenceToolCalls = []trace.ToolCall{{ID: "call_x", Name: "fetch", Arguments: "{}"}, {ID: "call_y", Name: "lookup", Arguments: "{}"}}
		c[1].Tools, c[1].ToolChoice, c[1].ReferenceAnswer = searchTool, `"required"`, "done"
		c[2].Tools, c[2].ToolChoice = searchTool, `"required"` // no reference: the mock follows tool_choice
		return c
	}
	for _, hints := range []bool{true, false} {
		id := map[bool]string{true: "h", false: "n"}[hints]
		sink, res := run(t, Config{Trace: writeTrace(t, conv(id)), Targets: []string{srv.URL()}, IgnoreEOS: true, MockHints: hints})
		recs := sink.byID()
		r0, r1, r2 := recs[id+"-0-0"], recs[id+"-1-0"], recs[id+"-2-0"]
		if r2.ToolCalls != 1 || r2.ToolCallMismatch {
			t.Errorf("%s-2 (no reference): %d calls, mismatch %v; want tool_choice's 1 call", id, r2.ToolCalls, r2.ToolCallMismatch)
		}
		if !hints {
			if !r0.ToolCallMismatch || !r1.ToolCallMismatch || res.ToolCallMismatches != 2 {
				t.Errorf("without hints: mismatches %v %v, result %d; want both turns", r0.ToolCallMismatch, r1.ToolCallMismatch, res.ToolCallMismatches)
			}
			continue
		}
		if r0.ToolCalls != 2 || r0.ToolCallMismatch || r1.ToolCalls != 0 || r1.ToolCallMismatch || res.ToolCallMismatches != 0 {
			t.Fatalf("with hints: turn 0 %d calls mismatch %v, turn 1 %d calls mismatch %v, result %d",
				r0.ToolCalls, r0.ToolCallMismatch, r1.ToolCalls, r1.ToolCallMismatch, res.ToolCallMismatches)
		}
		_, m := received(t, srv, id+"-1-0")
		a := m[1]
		if a.Role != "assistant" || len(a.ToolCalls) != 2 || a.ToolCalls[0].ID != "call_x" || a.ToolCalls[0].Function.Name != "fetch" ||
			a.ToolCalls[1].ID != "call_y" || a.ToolCalls[1].Function.Name != "lookup" || strings.Contains(a.ToolCalls[0].Function.Arguments, "{}") {
			t.Errorf("turn 1's history: %+v; want the live calls named fetch, lookup under the trace's ids", a)
		}
	}
}

// Open loop carries a reference answer that is a tool call without text
// as that tool call, with no text invented for it, in a chat as in a
// graph: the two build the same history for the turn after it.
func TestTimingTraceToolCallAnswer(t *testing.T) {
	srv := mocktest.Start(t, nil)
	conv := func(id string, parents []int32) []trace.Turn {
		c := []trace.Turn{gturn(id, 0, nil, 0), gturn(id, 1, parents, 0,
			trace.Message{Role: "tool", Content: "three results", ToolCallID: "call_s", Tokens: 2})}
		c[0].Tools, c[0].ToolChoice = searchTool, `"auto"`
		c[0].ReferenceToolCalls = []trace.ToolCall{{ID: "call_s", Name: "search", Arguments: `{"q":"x"}`}}
		c[1].ArrivalOffsetNs = int64(2 * time.Millisecond)
		return c
	}
	run(t, Config{Trace: writeTrace(t, conv("chat", nil), conv("graph", []int32{0})), Targets: []string{srv.URL()}, Timing: TimingTrace})
	var histories []string
	for _, id := range []string{"chat", "graph"} {
		_, m := received(t, srv, id+"-1-0")
		var got []string
		for _, b := range m {
			s := b.Role + ":" + content(b)
			for _, c := range b.ToolCalls {
				s += fmt.Sprintf(" call %s %s%s", c.ID, c.Function.Name, c.Function.Arguments)
			}
			if b.ToolCallID != "" {
				s += " for " + b.ToolCallID
			}
			got = append(got, strings.ReplaceAll(s, id, "C"))
		}
		histories = append(histories, strings.Join(got, "|"))
	}
	want := `user:step 0 of C|assistant:<null> call call_s search{"q":"x"}|tool:three results for call_s`
	for i, id := range []string{"chat", "graph"} {
		if histories[i] != want {
			t.Errorf("%s turn 1's messages\n got %s\nwant %s", id, histories[i], want)
		}
	}
}
