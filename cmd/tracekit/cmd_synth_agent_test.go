package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// synth --agent writes graphs whose new columns survive the file: parents,
// tool calls, tool results, tools; the same seed gives the same bytes
// whatever the output is called.
func TestSynthAgentWritesGraphs(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1790000000")
	dir := t.TempDir()
	args := []string{"synth", "--agent", "--conversations", "30", "--rounds", "2-4", "--fan-out", "2-3", "--sub-agents", "2",
		"--tool-latency", "1s", "--seed", "5"}
	var files [][]byte
	for _, name := range []string{"a.parquet", "other-name.parquet"} {
		p := filepath.Join(dir, name)
		stdout, stderr, code := runCLI(t, append(args, "-o", p)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "source agent") || !strings.Contains(stdout, "joins") {
			t.Errorf("stdout %s", stdout)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatal("two output names, two different traces")
	}
	rows := readTurns(t, filepath.Join(dir, "a.parquet"))
	calls, results, joins := map[string]bool{}, 0, 0
	for _, r := range rows {
		for _, c := range r.ReferenceToolCalls {
			calls[r.ConversationID+"/"+c.ID] = true
		}
		for _, m := range r.Messages {
			if m.Role == "tool" {
				results++
				if !calls[r.ConversationID+"/"+m.ToolCallID] {
					t.Fatalf("%s turn %d: result of unknown call %q", r.ConversationID, r.Turn, m.ToolCallID)
				}
			}
		}
		if len(r.Parents) == 2 {
			joins++
		}
		if r.Tools == "" || r.ToolChoice == "" {
			t.Fatalf("%s turn %d: tools %q choice %q", r.ConversationID, r.Turn, r.Tools, r.ToolChoice)
		}
	}
	// every round's calls are answered by both branches of its fan-out
	if len(calls) == 0 || results != 2*len(calls) || joins < 60 {
		t.Errorf("%d calls, %d results, %d joins", len(calls), results, joins)
	}
}

func TestSynthAgentBadFlagsExit2(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.parquet")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "--fan-out", "0"}, "--fan-out 0"},
		{[]string{"--agent", "--tools", "0"}, "--tools 0"},
		{[]string{"--agent", "--tool-latency", "soon"}, "--tool-latency"},
		{[]string{"--agent", "--source", "sharegpt"}, "--agent is --source agent"},
	} {
		_, stderr, code := runCLI(t, append(append([]string{"synth"}, c.args...), "-o", out)...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused command wrote a trace")
	}
}

// synth --source otel imports a span file into its graph and reports how
// the edges were found; bad input exits 2 naming the file and the span.
func TestSynthOTel(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.parquet")
	stdout, stderr, code := runCLI(t, "synth", "--source", "otel", "--input", "testdata/synth/otel_spans.json", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"2 conversations, 6 turns", "edges_history                5", "llm_spans                    6", "spans                        8", "output_tokens_from_usage     1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	rows := readTurns(t, out)
	var review []trace.Turn
	for _, r := range rows {
		if r.ConversationID == "review-1" {
			review = append(review, r)
		}
	}
	if len(review) != 5 || len(review[0].ReferenceToolCalls) != 2 || len(review[4].Parents) != 2 || review[1].Messages[0].ToolCallID != "c1" {
		t.Fatalf("review-1 read back: %+v", review)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"spans":[{"span_id":"s7","start_time":"2026-01-01T00:00:00","end_time":"2026-01-01T00:00:01","attributes":{"gen_ai.input.messages":"not json"}}]}`), 0o644)
	_, stderr, code = runCLI(t, "synth", "--source", "otel", "--input", bad, "-o", out, "--force")
	if code != 2 || !strings.Contains(stderr, bad) || !strings.Contains(stderr, "span s7") {
		t.Errorf("bad span: exit %d, %q", code, stderr)
	}
	_, stderr, code = runCLI(t, "synth", "--source", "otel", "-o", out)
	if code != 2 || !strings.Contains(stderr, "--input") {
		t.Errorf("no input: exit %d, %q", code, stderr)
	}
}
