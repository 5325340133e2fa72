package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// sourceNode is one request of an agentic source file, named as the test
// reads the file: "session/turn".
type sourceNode = string

// replayImport synthesizes src with --source source, replays the trace
// closed-loop against the mock and checks, node by node against deps (the
// source file's nodes and what each waits for, read by the test itself),
// that the trace holds exactly the source's nodes and dependencies and that
// the recording sent no node before every node it depends on was done.
// key names a trace turn's node from the turn (its messages).
func replayImport(t *testing.T, source, src string, deps map[sourceNode][]sourceNode, key func(trace.Turn) sourceNode) {
	t.Helper()
	srv := mocktest.Start(t, func(c *mock.Config) {
		c.Latency.DecodeBase = mock.Duration(200 * time.Microsecond)
		c.Latency.MaxModelLen = 1 << 20 // agentic coding prompts pass 100k tokens
	})
	dir := t.TempDir()
	tr, rec := filepath.Join(dir, "trace.parquet"), filepath.Join(dir, "rec.parquet")
	if _, stderr, code := runCLI(t, "synth", "--source", source, "--input", src, "--model", "tracekit-mock", "--rate", "0", "-o", tr); code != ExitOK {
		t.Fatalf("synth exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--model", "tracekit-mock", "--speed", "1000",
		"--ignore-eos", "--progress", "none", "--no-analyze", "-o", rec); code != ExitOK {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	turns := readTurns(t, tr)
	nodeOf := map[string]sourceNode{} // conversation/turn -> source node
	for _, tu := range turns {
		n := key(tu)
		if _, ok := deps[n]; !ok {
			t.Fatalf("trace turn %s/%d is no node of the source (%q)", tu.ConversationID, tu.Turn, n)
		}
		if slices.Contains(mapValues(nodeOf), n) {
			t.Fatalf("source node %s is in the trace twice", n)
		}
		nodeOf[fmt.Sprintf("%s/%d", tu.ConversationID, tu.Turn)] = n
	}
	if len(nodeOf) != len(deps) {
		t.Fatalf("the trace holds %d of the source's %d nodes", len(nodeOf), len(deps))
	}
	recs := readRecords(t, rec)
	byNode := map[sourceNode]trace.Record{}
	for _, r := range recs {
		if r.ErrorKind != "" {
			t.Fatalf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
		byNode[nodeOf[fmt.Sprintf("%s/%d", r.ConversationID, r.Turn)]] = r
	}
	if len(byNode) != len(deps) {
		t.Fatalf("%d records for %d nodes", len(byNode), len(deps))
	}
	checked := 0
	for _, tu := range turns {
		n := nodeOf[fmt.Sprintf("%s/%d", tu.ConversationID, tu.Turn)]
		var got []sourceNode
		edges := slices.Concat(tu.Parents, tu.After)
		if len(tu.Parents) == 0 && tu.Turn > 0 {
			edges = append(edges, tu.Turn-1)
		}
		for _, p := range edges {
			if p != trace.RootParent {
				got = append(got, nodeOf[fmt.Sprintf("%s/%d", tu.ConversationID, p)])
			}
		}
		want := slices.Clone(deps[n])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("node %s: the trace waits for %v, the source for %v", n, got, want)
		}
		r := byNode[n]
		for _, d := range want {
			if w := byNode[d]; r.SentNs < w.DoneNs {
				t.Errorf("node %s sent at %d, before %s was done at %d", n, r.SentNs, d, w.DoneNs)
			}
			checked++
		}
	}
	t.Logf("%d nodes, %d dependencies checked", len(deps), checked)
}

func mapValues(m map[string]sourceNode) []sourceNode {
	var v []sourceNode
	for _, x := range m {
		v = append(v, x)
	}
	return v
}

// dagDeps reads an AIPerf dag_jsonl file the simple way: every session's
// turns, each waiting for the session's previous turn; a forked or
// spawned session's first turn for the turn that started it (a
// pre_session_spawns child for what its starter's first turn waits for);
// a join turn for the spawned session's last turn. A bare fork ends its
// session after the forking turn. It also returns each node's last message
// text, which names it in the trace.
func dagDeps(t *testing.T, path string) (map[sourceNode][]sourceNode, map[string]sourceNode) {
	t.Helper()
	type turn struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Forks  []json.RawMessage `json:"forks"`
		Spawns []json.RawMessage `json:"spawns"`
	}
	type session struct {
		ID    string   `json:"session_id"`
		Pre   []string `json:"pre_session_spawns"`
		Turns []turn   `json:"turns"`
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sessions []session
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var s session
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	node := func(s string, k int) sourceNode { return fmt.Sprintf("%s/%d", s, k) }
	last := map[string]int{}
	for _, s := range sessions {
		last[s.ID] = len(s.Turns) - 1
		for k, tu := range s.Turns {
			for _, fk := range tu.Forks {
				if fk[0] == '"' && k < last[s.ID] {
					last[s.ID] = k
				}
			}
		}
	}
	deps := map[sourceNode][]sourceNode{}
	names := map[string]sourceNode{}
	firstDeps := map[string][]sourceNode{} // extra waits of a child's first turn
	preOf := map[string]string{}           // pre-spawned child -> starter
	for _, s := range sessions {
		for _, c := range s.Pre {
			preOf[c] = s.ID
		}
		for k := 0; k <= last[s.ID]; k++ {
			tu := s.Turns[k]
			for _, fk := range tu.Forks {
				var id string
				if json.Unmarshal(fk, &id) != nil {
					var o struct{ Child string }
					json.Unmarshal(fk, &o)
					id = o.Child
				}
				firstDeps[id] = append(firstDeps[id], node(s.ID, k))
			}
			for _, sp := range tu.Spawns {
				var id string
				if json.Unmarshal(sp, &id) == nil {
					firstDeps[id] = append(firstDeps[id], node(s.ID, k))
					deps[node(s.ID, k+1)] = append(deps[node(s.ID, k+1)], node(id, last[id]))
					continue
				}
				var o struct {
					Children []string `json:"children"`
					JoinAt   int      `json:"join_at"`
				}
				json.Unmarshal(sp, &o)
				for _, c := range o.Children {
					firstDeps[c] = append(firstDeps[c], node(s.ID, k))
					deps[node(s.ID, o.JoinAt)] = append(deps[node(s.ID, o.JoinAt)], node(c, last[c]))
				}
			}
		}
	}
	for _, s := range sessions {
		for k := 0; k <= last[s.ID]; k++ {
			n := node(s.ID, k)
			deps[n] = append(deps[n], []sourceNode{}...)
			if k > 0 {
				deps[n] = append(deps[n], node(s.ID, k-1))
			}
			msgs := s.Turns[k].Messages
			var text string
			if err := json.Unmarshal(msgs[len(msgs)-1].Content, &text); err != nil {
				var parts []struct{ Text string }
				json.Unmarshal(msgs[len(msgs)-1].Content, &parts)
				text = parts[0].Text
			}
			names[text] = n
		}
		deps[node(s.ID, 0)] = append(deps[node(s.ID, 0)], firstDeps[s.ID]...)
	}
	for c, by := range preOf {
		deps[node(c, 0)] = append(deps[node(c, 0)], deps[node(by, 0)]...)
	}
	return deps, names
}

// AIPerf dag_jsonl sessions replayed against the mock honour every spawn,
// fork and join of the source file: the fixture (every rule) and the
// shared samples.
func TestAIPerfDAGReplayHonoursDependencies(t *testing.T) {
	files := []string{filepath.Join("testdata", "synth", "aiperf_dag.jsonl")}
	shared := filepath.Join("..", "..", "..", "shared", "data", "aiperf_dag")
	if m, _ := filepath.Glob(filepath.Join(shared, "*.dag.jsonl")); len(m) > 0 {
		files = append(files, m...)
	} else {
		t.Log("shared data absent: the fixture only")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			deps, names := dagDeps(t, f)
			replayImport(t, "aiperf-dag", f, deps, func(tu trace.Turn) sourceNode {
				return names[tu.Messages[len(tu.Messages)-1].Content]
			})
		})
	}
}

// wekaDeps reads Weka sessions (a file of one object, JSON Lines, or a
// directory of .json files) the simple way: a parent call waits for the
// parent call before it; a subagent's first call for the parent call
// before its marker, each next call for the one before; the first parent
// call after the marker whose t is at or after the subagent's end (marker
// t + duration_ms, else its last call's t + api_time) for its last call.
// A nested t below the marker's is relative to it. Nodes are named
// "session/arrival ms/in/out", which is what the trace shows of them.
func wekaDeps(t *testing.T, path string) map[sourceNode][]sourceNode {
	t.Helper()
	type call struct {
		T          float64  `json:"t"`
		Type       string   `json:"type"`
		In         int      `json:"in"`
		Out        int      `json:"out"`
		APITime    float64  `json:"api_time"`
		DurationMs *float64 `json:"duration_ms"`
		Requests   []call   `json:"requests"`
	}
	type session struct {
		ID       string `json:"id"`
		Requests []call `json:"requests"`
	}
	var sessions []session
	files := []string{path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.json"))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(strings.NewReader(string(b)))
		for d.More() {
			var s session
			if err := d.Decode(&s); err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, s)
		}
	}
	deps := map[sourceNode][]sourceNode{}
	for _, s := range sessions {
		t0 := math.Inf(1)
		for _, r := range s.Requests {
			t0 = math.Min(t0, r.T)
			for _, q := range r.Requests {
				at := q.T
				if at < r.T {
					at += r.T
				}
				t0 = math.Min(t0, at)
			}
		}
		name := func(at float64, c call) sourceNode {
			return fmt.Sprintf("%s/%d/%d/%d", s.ID, int64(math.Round((at-t0)*1e3)), c.In, max(c.Out, 1))
		}
		add := func(n sourceNode, d ...sourceNode) {
			if _, dup := deps[n]; dup {
				t.Fatalf("two calls named %s: the test cannot tell them apart", n)
			}
			deps[n] = d
		}
		type join struct {
			after int // list index of the marker
			end   float64
			last  sourceNode
		}
		var joins []join
		prev := ""
		for i, r := range s.Requests {
			if r.Type != "subagent" {
				n := name(r.T, r)
				if prev != "" {
					add(n, prev)
				} else {
					add(n)
				}
				prev = n
				continue
			}
			p := prev
			var end float64
			for _, q := range r.Requests {
				at := q.T
				if at < r.T {
					at += r.T
				}
				n := name(at, q)
				if p != "" {
					add(n, p)
				} else {
					add(n)
				}
				p, end = n, at+q.APITime
			}
			if r.DurationMs != nil {
				end = r.T + *r.DurationMs/1e3
			}
			if len(r.Requests) > 0 {
				joins = append(joins, join{i, end, p})
			}
		}
		for _, j := range joins {
			for _, r := range s.Requests[j.after+1:] {
				if r.Type != "subagent" && r.T >= j.end {
					n := name(r.T, r)
					deps[n] = append(deps[n], j.last)
					break
				}
			}
		}
	}
	return deps
}

// Weka sessions replayed against the mock honour every call order,
// subagent spawn and join of the source: the fixture (JSON Lines, both
// subagent clocks, a background subagent) and the shared traces.
func TestWekaReplayHonoursDependencies(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	inputs := []string{filepath.Join("testdata", "synth", "weka.jsonl")}
	shared := filepath.Join("..", "..", "..", "shared", "data", "weka")
	if _, err := os.Stat(shared); err == nil {
		inputs = append(inputs, shared)
	} else {
		t.Log("shared data absent: the fixture only")
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			deps := wekaDeps(t, in)
			replayImport(t, "weka", in, deps, func(tu trace.Turn) sourceNode {
				return fmt.Sprintf("%s/%d/%d/%d", tu.ConversationID, int64(math.Round(float64(tu.ArrivalOffsetNs-tu.StartOffsetNs)/1e6)), tu.InputTokens, tu.OutputTokens)
			})
		})
	}
}

// sweDeps reads SWE-agent trajectories the simple way: every assistant
// message of a history is a call, which waits for the call before it.
// Calls are named "session/k" and found in the trace by their answer.
func sweDeps(t *testing.T, path string) (map[sourceNode][]sourceNode, map[string]sourceNode) {
	t.Helper()
	files := []string{path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.traj"))
	}
	deps := map[sourceNode][]sourceNode{}
	names := map[string]sourceNode{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct {
			History []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"history"`
		}
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSuffix(filepath.Base(f), ".traj")
		k := 0
		for _, h := range tr.History {
			if h.Role != "assistant" {
				continue
			}
			n := fmt.Sprintf("%s/%d", id, k)
			deps[n] = nil
			if k > 0 {
				deps[n] = []sourceNode{fmt.Sprintf("%s/%d", id, k-1)}
			}
			if _, dup := names[id+"\x00"+h.Content]; dup {
				t.Fatalf("%s: two answers %q: the test cannot tell them apart", f, h.Content)
			}
			names[id+"\x00"+h.Content] = n
			k++
		}
	}
	return deps, names
}

// SWE-agent sessions replayed against the mock send every call after the
// one before it was answered: the fixture and the shared trajectories.
func TestSWEAgentReplayHonoursDependencies(t *testing.T) {
	inputs := []string{filepath.Join("testdata", "synth", "swe_agent.traj")}
	shared := filepath.Join("..", "..", "..", "shared", "data", "swe_agent")
	if _, err := os.Stat(shared); err == nil {
		inputs = append(inputs, shared)
	} else {
		t.Log("shared data absent: the fixture only")
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			deps, names := sweDeps(t, in)
			replayImport(t, "swe-agent", in, deps, func(tu trace.Turn) sourceNode {
				return names[tu.ConversationID+"\x00"+tu.ReferenceAnswer]
			})
		})
	}
}

// dynamoDeps reads Dynamo agent request traces the simple way, by
// Dynamo's documented lowering: a session's requests chained in start
// order; a child session's first request waits for the latest parent
// request started at or before it; the first later parent request started
// at or after the child's last end waits for the child's last-finishing
// request. Nodes are named "start ms from the trace start/in/out".
func dynamoDeps(t *testing.T, path string) map[sourceNode][]sourceNode {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		session, parent string
		start, end      float64
		in, out         int
	}
	var reqs []req
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			EventType    string          `json:"event_type"`
			Event        json.RawMessage `json:"event"`
			AgentContext struct {
				SessionID       string `json:"session_id"`
				ParentSessionID string `json:"parent_session_id"`
			} `json:"agent_context"`
			Request struct {
				Received float64 `json:"request_received_ms"`
				Total    float64 `json:"total_time_ms"`
				In       int     `json:"input_tokens"`
				Out      int     `json:"output_tokens"`
			} `json:"request"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Event) > 0 {
			if err := json.Unmarshal(r.Event, &r); err != nil {
				t.Fatal(err)
			}
		}
		if r.EventType == "request_end" {
			reqs = append(reqs, req{r.AgentContext.SessionID, r.AgentContext.ParentSessionID, r.Request.Received, r.Request.Received + r.Request.Total, r.Request.In, r.Request.Out})
		}
	}
	origin := math.Inf(1)
	bySession := map[string][]req{}
	for _, r := range reqs {
		origin = math.Min(origin, r.start)
		bySession[r.session] = append(bySession[r.session], r)
	}
	name := func(r req) sourceNode {
		return fmt.Sprintf("%d/%d/%d", int64(math.Round(r.start-origin)), r.in, max(r.out, 1))
	}
	deps := map[sourceNode][]sourceNode{}
	for _, rs := range bySession {
		slices.SortFunc(rs, func(a, b req) int { return int(a.start - b.start) })
		for k, r := range rs {
			deps[name(r)] = nil
			if k > 0 {
				deps[name(r)] = []sourceNode{name(rs[k-1])}
			}
		}
	}
	for _, rs := range bySession {
		par := bySession[rs[0].parent]
		if rs[0].parent == "" || par == nil {
			continue
		}
		launch := -1
		for k, p := range par {
			if p.start <= rs[0].start {
				launch = k
			}
		}
		if launch >= 0 {
			deps[name(rs[0])] = append(deps[name(rs[0])], name(par[launch]))
		}
		last := rs[0]
		for _, r := range rs {
			if r.end >= last.end {
				last = r
			}
		}
		for k, p := range par {
			if k > launch && p.start >= last.end {
				deps[name(p)] = append(deps[name(p)], name(last))
				break
			}
		}
	}
	return deps
}

// Dynamo agent traces replayed against the mock honour every session
// chain, sub-agent launch and join of the source file (no public capture
// exists: the fixture only).
func TestDynamoReplayHonoursDependencies(t *testing.T) {
	in := filepath.Join("testdata", "synth", "dynamo.jsonl")
	replayImport(t, "dynamo", in, dynamoDeps(t, in), func(tu trace.Turn) sourceNode {
		return fmt.Sprintf("%d/%d/%d", int64(math.Round(float64(tu.ArrivalOffsetNs)/1e6)), tu.InputTokens, tu.OutputTokens)
	})
}
