package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

func importWeka(t *testing.T, name, text string) ([]Conversation, *Weka, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewWeka(WekaOptions{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	convs, err := s.Conversations(context.Background())
	return convs, s, err
}

// A subagent spawned on the parent call before its marker (nested times
// relative to the spawn) runs while the parent goes on, and joins the
// first parent call at or after its end; prompts are virtual, of the
// recorded lengths, their hash blocks salted by session.
func TestWekaGraph(t *testing.T) {
	convs, s, err := importWeka(t, "s.json", `{"id":"x","block_size":64,"hash_id_scope":"local","requests":[
{"t":0,"type":"n","in":130,"out":5,"hash_ids":[1,2],"api_time":1},
{"t":2,"type":"subagent","agent_id":"a1","duration_ms":3000,"requests":[
  {"t":0,"type":"s","in":70,"out":3,"hash_ids":[9],"api_time":0.5},
  {"t":1,"type":"s","in":80,"out":3,"hash_ids":[9],"api_time":0.5}]},
{"t":3,"type":"n","in":200,"out":4,"hash_ids":[1,2,3],"api_time":1},
{"t":6,"type":"n","in":260,"out":4,"hash_ids":[1,2,3,4],"api_time":1}]}`)
	if err != nil {
		t.Fatal(err)
	}
	c := convs[0]
	// order by time: p0 (0), s0 (2), s1 (3) and p1 (3): s1 first by list, p2 (6)
	want := []struct {
		in    int32
		after []int32
		think int64
	}{{130, nil, 0}, {70, []int32{0}, 1e9}, {80, []int32{1}, 0.5e9}, {200, []int32{0}, 2e9}, {260, []int32{2, 3}, 2e9}}
	if len(c) != len(want) {
		t.Fatalf("%d turns, want %d", len(c), len(want))
	}
	for i, w := range want {
		tu := c[i]
		if tu.InputTokens != w.in || !equalInt32(tu.After, w.after) || tu.ThinkTimeNs != w.think {
			t.Errorf("turn %d: in %d after %v think %d; want %+v", i, tu.InputTokens, tu.After, tu.ThinkTimeNs, w)
		}
		if m := tu.Messages[0]; !m.Virtual || m.Tokens != w.in || (i > 0 && (len(tu.Parents) != 1 || tu.Parents[0] != trace.RootParent)) {
			t.Errorf("turn %d: message %+v parents %v", i, m, tu.Parents)
		}
	}
	if c[0].PrefixHashes[0] != c[3].PrefixHashes[0] || c[1].PrefixHashes[0] != c[2].PrefixHashes[0] || c[0].PrefixHashes[0] == 1 {
		t.Errorf("hashes %v %v %v", c[0].PrefixHashes, c[1].PrefixHashes, c[3].PrefixHashes)
	}
	if p := s.Prompts(); p == nil || p.BlockSize != 64 {
		t.Errorf("prompts %+v", p)
	}
	if r := s.Report(); r["subagent_joins"] != "1" || r["subagents_relative_clock"] != "1" {
		t.Errorf("report %v", r)
	}
}

// Bad input names the file, line and field.
func TestWekaBadInput(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{"id":"x","block_size":64,"requests":[{"t":0,"type":"q","in":5,"out":1}]}`, `line 1: field "requests[0].type"`},
		{`{"id":"x","block_size":64,"requests":[{"t":0,"type":"n","in":5,"out":1,"hash_ids":[1,2]}]}`, `field "requests[0].hash_ids"`},
		{`{"id":"x","block_size":0,"requests":[]}`, `field "block_size"`},
		{`{"id":"x","block_size":64,"requests":[],"extra":1}`, `line 1`},
		{`{"id":"x","block_size":64,"requests":[{"type":"n","in":5,"out":1}]}` + "\n" + `{"id":"x","block_size":64,"requests":[]}`, `line 1: field "requests[0].t"`},
		{`{"id":"x","block_size":64,"requests":[{"t":0,"type":"n","in":5,"out":1}]}` + "\n" + `{"id":"x","block_size":64,"requests":[]}`, `line 2: field "id"`},
	} {
		_, _, err := importWeka(t, "s.jsonl", c.text)
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "s.jsonl") {
			t.Errorf("%s: error %v, want a row error with %q", c.text, err, c.want)
		}
	}
}

// The shared traces import whole: every call of every session and subagent.
func TestWekaShared(t *testing.T) {
	p := filepath.Join("..", "..", "..", "shared", "data", "weka")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data absent: %v", err)
	}
	s, _ := NewWeka(WekaOptions{Path: p})
	convs, err := s.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range convs {
		n += len(c)
		for _, tu := range c {
			if err := tu.Check(); err != nil {
				t.Error(err)
			}
		}
	}
	// 3 + 4 + 14 + (20+5+7) + (9+4+12+17+11) calls
	if len(convs) != 5 || n != 106 {
		t.Errorf("%d sessions, %d calls; want 5, 106", len(convs), n)
	}
}
