package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

func importDAG(t *testing.T, text string) ([]Conversation, *AIPerfDAG, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.dag.jsonl")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewAIPerfDAG(AIPerfDAGOptions{Path: p, Tokenizer: tokenizer.Default()})
	if err != nil {
		t.Fatal(err)
	}
	convs, err := s.Conversations(context.Background())
	return convs, s, err
}

// A spawn with join_at, a background fork and a bare fork become parents
// (history), root branches and wait-only edges, numbered in dependency
// order; delays are think times.
func TestAIPerfDAGGraph(t *testing.T) {
	convs, s, err := importDAG(t, `{"session_id":"p","turns":[{"messages":[{"role":"user","content":"a"}],"max_tokens":3,"spawns":[{"children":["w"],"join_at":2}]},{"messages":[{"role":"user","content":"b"}],"delay":20,"forks":[{"child":"f","background":true}]},{"messages":[{"role":"user","content":"c"}],"forks":["g"]},{"messages":[{"role":"user","content":"dropped"}]}]}
{"session_id":"w","turns":[{"messages":[{"role":"user","content":"w0"}]},{"messages":[{"role":"user","content":"w1"}],"delay":5}]}
{"session_id":"f","turns":[{"messages":[{"role":"user","content":"f0"}]}]}
{"session_id":"g","turns":[{"messages":[{"role":"user","content":"g0"}]}]}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 {
		t.Fatalf("%d conversations, want 1", len(convs))
	}
	type want struct {
		text           string
		parents, after []int32
		think          int64
	}
	// ready nodes by session line, then turn: p0, p1, w0, w1, p2, f0, g0
	wants := []want{
		{"a", nil, nil, 0},
		{"b", []int32{0}, nil, 20e6},
		{"w0", []int32{trace.RootParent}, []int32{0}, 0},
		{"w1", []int32{2}, nil, 5e6},
		{"c", []int32{1}, []int32{3}, 0},
		{"f0", []int32{1}, nil, 0},
		{"g0", []int32{4}, nil, 0},
	}
	c := convs[0]
	if len(c) != len(wants) {
		t.Fatalf("%d turns, want %d", len(c), len(wants))
	}
	for i, w := range wants {
		tu := c[i]
		if tu.Messages[0].Content != w.text || !equalInt32(tu.Parents, w.parents) || !equalInt32(tu.After, w.after) || tu.ThinkTimeNs != w.think {
			t.Errorf("turn %d: %q parents %v after %v think %d; want %+v", i, tu.Messages[0].Content, tu.Parents, tu.After, tu.ThinkTimeNs, w)
		}
		if err := tu.Check(); err != nil {
			t.Error(err)
		}
	}
	if c[0].OutputTokens != 3 || c[1].OutputTokens != DAGDefaultOutputTokens {
		t.Errorf("output tokens %d, %d", c[0].OutputTokens, c[1].OutputTokens)
	}
	if r := s.Report(); r["turns_ended_by_fork"] != "1" || r["edges_after"] != "2" || r["edges_history"] != "5" {
		t.Errorf("report %v", r)
	}
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Bad input is named by file, line and field.
func TestAIPerfDAGBadInput(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{"session_id":"a","turns":[{"messages":[]}],"bogus":1}` + "\n", `line 1`},
		{`{"session_id":"a","turns":[{"messages":[],"spawns":["nope"]}]}` + "\n", `line 1: field "turns[0].spawns[0]": no session "nope"`},
		{`{"session_id":"a","turns":[{"messages":[]}]}` + "\n" + `{"session_id":"a","turns":[{"messages":[]}]}` + "\n", `line 2: field "session_id": "a" is also the session of line 1`},
		{`{"session_id":"o","orchestrator":true,"rounds":2}` + "\n", `field "orchestrator"`},
		{`{"session_id":"a","turns":[{"messages":[{"role":"user","content":3}]}]}` + "\n", `field "turns[0].messages[0]": content`},
		{`{"session_id":"a","turns":[{"messages":[],"spawns":[{"children":["b"],"join_at":0}]}]}` + "\n" + `{"session_id":"b","turns":[{"messages":[]}]}` + "\n", `turns[0].spawns[0].join_at`},
	} {
		_, _, err := importDAG(t, c.text)
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "s.dag.jsonl") {
			t.Errorf("%s: error %v, want a row error with %q", c.text, err, c.want)
		}
	}
}

// The shared AIPerf fixtures import whole: every session and turn.
func TestAIPerfDAGShared(t *testing.T) {
	for _, c := range []struct {
		name         string
		turns, after int
	}{{"mixed_full.dag.jsonl", 6, 2}, {"spawn_join.dag.jsonl", 5, 2}} {
		p := filepath.Join("..", "..", "..", "shared", "data", "aiperf_dag", c.name)
		if _, err := os.Stat(p); err != nil {
			t.Skipf("shared data absent: %v", err)
		}
		s, _ := NewAIPerfDAG(AIPerfDAGOptions{Path: p, Tokenizer: tokenizer.Default()})
		convs, err := s.Conversations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		r := s.Report()
		if len(convs) != 1 || len(convs[0]) != c.turns || r["edges_after"] != "2" {
			t.Errorf("%s: %d conversations, report %v", c.name, len(convs), r)
		}
	}
}
