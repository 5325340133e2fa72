package synth

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// Each call's transcript as replay rebuilds it (history, messages,
// answer) is the trajectory's history up to and including its assistant
// message; think times are the previous step's execution_time.
func TestSWEAgentTranscripts(t *testing.T) {
	dir := t.TempDir()
	fixture := `{"environment":"e","trajectory":[{"execution_time":"0.5"},{"execution_time":2}],"history":[
{"role":"system","content":"sys"},{"role":"user","content":"task"},
{"role":"assistant","content":"look","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},
{"role":"tool","content":"out","tool_call_ids":["c1"]},
{"role":"assistant","content":"edit"},{"role":"user","content":"obs"},{"role":"assistant","content":"done"}]}`
	if err := os.WriteFile(filepath.Join(dir, "a.traj"), []byte(fixture), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(dir, "a.traj")}
	if m, _ := filepath.Glob("../../../shared/data/swe_agent/*.traj"); len(m) > 0 {
		paths = append(paths, m...)
	}
	for _, p := range paths {
		s, _ := NewSWEAgent(SWEAgentOptions{Path: p, Tokenizer: tokenizer.Default()})
		convs, err := s.Conversations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		var tr struct {
			History []struct{ Role, Content string }
		}
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatal(err)
		}
		ts := Transcripts(convs[0])
		k := 0
		for i, h := range tr.History {
			if h.Role != "assistant" {
				continue
			}
			got := ts[k]
			if len(got) != i+1 {
				t.Fatalf("%s call %d: transcript of %d messages, want %d", p, k, len(got), i+1)
			}
			for j := range got {
				if got[j].Role != tr.History[j].Role || got[j].Content != tr.History[j].Content {
					t.Fatalf("%s call %d message %d: %s %.40q, want %s %.40q", p, k, j, got[j].Role, got[j].Content, tr.History[j].Role, tr.History[j].Content)
				}
			}
			k++
		}
		if k != len(convs[0]) {
			t.Errorf("%s: %d calls, %d assistant messages", p, len(convs[0]), k)
		}
	}
	s, _ := NewSWEAgent(SWEAgentOptions{Path: paths[0], Tokenizer: tokenizer.Default()})
	convs, _ := s.Conversations(context.Background())
	if c := convs[0]; c[1].ThinkTimeNs != 5e8 || c[2].ThinkTimeNs != 2e9 || c[2].Messages[0].Role != "user" || c[0].ReferenceToolCalls[0].Name != "bash" || c[1].Messages[0].ToolCallID != "c1" {
		t.Errorf("calls %+v", c)
	}
}

// Bad input names the file and the field.
func TestSWEAgentBadInput(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{"history":[{"role":"robot","content":"x"}]}`, `field "history[0]": role "robot"`},
		{`{"history":[{"role":"user","content":5}]}`, `field "history[0]": content`},
		{`{"history":[}`, `line 1`},
	} {
		p := filepath.Join(t.TempDir(), "b.traj")
		os.WriteFile(p, []byte(c.text), 0o644)
		s, _ := NewSWEAgent(SWEAgentOptions{Path: p, Tokenizer: tokenizer.Default()})
		_, err := s.Conversations(context.Background())
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "b.traj") {
			t.Errorf("%s: error %v, want a row error with %q", c.text, err, c.want)
		}
	}
}
