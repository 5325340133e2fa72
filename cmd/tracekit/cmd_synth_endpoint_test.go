package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// synthRows runs synth with args into dir/name and reads the trace back.
func synthRows(t *testing.T, dir, name string, args ...string) ([]trace.Turn, trace.TraceMeta, string) {
	t.Helper()
	out := filepath.Join(dir, name)
	stdout, stderr, code := runCLI(t, append(append([]string{"synth"}, args...), "-o", out)...)
	if code != 0 {
		t.Fatalf("synth %v: exit %d: %s", args, code, stderr)
	}
	rows, meta, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	return rows, meta, stdout
}

// --endpoint stamps every turn of every kind of source and changes
// nothing else: the same rows as without it, an agent's tool calls kept.
func TestSynthEndpointStampsEveryTurn(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, endpoint string
		args           []string
	}{
		{"synthetic", trace.EndpointResponses, []string{"--conversations", "4", "--turns", "2-3", "--input-tokens", "10-30",
			"--output-tokens", "5-10", "--rate", "3", "--seed", "5"}},
		{"sharegpt", trace.EndpointMessages, []string{"--source", "sharegpt", "--input", "testdata/synth/sharegpt.json"}},
		{"mooncake", trace.EndpointChat, []string{"--source", "mooncake", "--input", "testdata/synth/mooncake.jsonl"}},
		{"agent", trace.EndpointResponses, []string{"--agent", "--conversations", "3", "--rounds", "2", "--fan-out", "2",
			"--tool-result-tokens", "10", "--input-tokens", "10", "--output-tokens", "5", "--system-tokens", "10", "--seed", "3"}},
		{"agent-messages", trace.EndpointMessages, []string{"--agent", "--conversations", "2", "--rounds", "1-2", "--sub-agents", "2", "--seed", "4"}},
	} {
		plain, _, _ := synthRows(t, dir, c.name+"-plain.parquet", c.args...)
		stamped, meta, _ := synthRows(t, dir, c.name+".parquet", append([]string{"--endpoint", c.endpoint}, c.args...)...)
		if len(plain) == 0 || len(plain) != len(stamped) {
			t.Fatalf("%s: %d rows stamped, %d plain", c.name, len(stamped), len(plain))
		}
		calls := 0
		for i := range stamped {
			if stamped[i].Endpoint != c.endpoint || plain[i].Endpoint != "" {
				t.Fatalf("%s row %d: endpoint %q (plain %q), want %q", c.name, i, stamped[i].Endpoint, plain[i].Endpoint, c.endpoint)
			}
			calls += len(stamped[i].ReferenceToolCalls)
			s := stamped[i]
			s.Endpoint = ""
			if !reflect.DeepEqual(s, plain[i]) {
				t.Fatalf("%s row %d differs beyond its endpoint:\n%+v\n%+v", c.name, i, s, plain[i])
			}
		}
		if strings.HasPrefix(c.name, "agent") && calls == 0 {
			t.Errorf("%s: no tool calls kept", c.name)
		}
		if meta.Options["endpoint"] != c.endpoint {
			t.Errorf("%s: options endpoint %q", c.name, meta.Options["endpoint"])
		}
	}
}

// Embeddings: one request per conversation, --batch-size inputs of
// --input-tokens tokens each, exact under the tokenizer; the same seed
// gives the same trace.
func TestSynthEmbeddings(t *testing.T) {
	dir := t.TempDir()
	tok, err := tokenizer.Open(tokenizer.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--endpoint", "embeddings", "--batch-size", "3", "--input-tokens", "17", "--conversations", "6", "--rate", "4", "--seed", "2"}
	rows, meta, _ := synthRows(t, dir, "e.parquet", args...)
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	ids := map[string]bool{}
	for i, r := range rows {
		ids[r.ConversationID] = true
		if r.Endpoint != trace.EndpointEmbeddings || r.Turn != 0 || r.OutputTokens != 0 || r.InputTokens != 51 || len(r.Messages) != 3 {
			t.Fatalf("row %d: %s turn %d, %d in, %d out, %d messages; want embeddings, one turn, 3 x 17 in, 0 out", i, r.Endpoint, r.Turn, r.InputTokens, r.OutputTokens, len(r.Messages))
		}
		for _, m := range r.Messages {
			if m.Role != trace.RoleInput || m.Tokens != 17 || tok.Count(m.Content) != 17 {
				t.Fatalf("row %d: message %s of %d tokens (text counts %d), want input of 17", i, m.Role, m.Tokens, tok.Count(m.Content))
			}
		}
		if i > 0 && r.ArrivalOffsetNs < rows[i-1].ArrivalOffsetNs {
			t.Fatalf("row %d arrives before row %d", i, i-1)
		}
	}
	if len(ids) != 6 || rows[len(rows)-1].ArrivalOffsetNs == 0 {
		t.Errorf("%d conversations, last arrival %d: want 6 spread by --rate", len(ids), rows[len(rows)-1].ArrivalOffsetNs)
	}
	for _, k := range []string{"batch-size", "input-tokens", "endpoint", "conversations"} {
		if meta.Options[k] == "" {
			t.Errorf("options lack %s: %v", k, meta.Options)
		}
	}
	if _, ok := meta.Options["turns"]; ok {
		t.Errorf("options record --turns, which embeddings do not read: %v", meta.Options)
	}
	again, _, _ := synthRows(t, dir, "e2.parquet", args...)
	if !reflect.DeepEqual(rows, again) {
		t.Error("the same seed gave another trace")
	}
	other, _, _ := synthRows(t, dir, "e3.parquet", append(args, "--seed", "3")...)
	if reflect.DeepEqual(rows[0].Messages, other[0].Messages) {
		t.Error("another seed gave the same text")
	}
}

// Rerank and score: one query and --documents documents, each of its
// exact token count.
func TestSynthRerankScore(t *testing.T) {
	dir := t.TempDir()
	tok, err := tokenizer.Open(tokenizer.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{trace.EndpointRerank, trace.EndpointScore} {
		rows, _, _ := synthRows(t, dir, ep+".parquet", "--endpoint", ep, "--documents", "4", "--query-tokens", "6",
			"--document-tokens", "11", "--conversations", "3", "--seed", "1")
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows", ep, len(rows))
		}
		for i, r := range rows {
			if r.Endpoint != ep || len(r.Messages) != 5 || r.InputTokens != 6+4*11 || r.OutputTokens != 0 {
				t.Fatalf("%s row %d: %s, %d messages, %d in, %d out", ep, i, r.Endpoint, len(r.Messages), r.InputTokens, r.OutputTokens)
			}
			for j, m := range r.Messages {
				role, n := trace.RoleDocument, 11
				if j == 0 {
					role, n = trace.RoleQuery, 6
				}
				if m.Role != role || int(m.Tokens) != n || tok.Count(m.Content) != n {
					t.Fatalf("%s row %d message %d: %s of %d tokens (text %d), want %s of %d", ep, i, j, m.Role, m.Tokens, tok.Count(m.Content), role, n)
				}
			}
		}
	}
	// distributions: documents per query within their range
	rows, _, _ := synthRows(t, dir, "range.parquet", "--endpoint", "rerank", "--documents", "1-3", "--conversations", "40", "--seed", "7")
	seen := map[int]bool{}
	for _, r := range rows {
		seen[len(r.Messages)-1] = true
	}
	if !seen[1] || !seen[3] || len(seen) != 3 {
		t.Errorf("documents per query seen %v, want 1, 2 and 3", seen)
	}
}

// Flags that make no sense with the endpoint are refused, exit 2, all of
// them named in one message, and no trace is written.
func TestSynthEndpointRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--endpoint", "embeddings", "--turns", "3", "--think-time", "1s"}, []string{"--turns", "--think-time"}},
		{[]string{"--endpoint", "embeddings", "--agent", "--output-tokens", "9"}, []string{"--agent", "--output-tokens"}},
		{[]string{"--endpoint", "rerank", "--batch-size", "2", "--input-tokens", "5"}, []string{"--batch-size", "--input-tokens"}},
		{[]string{"--endpoint", "embeddings", "--documents", "2", "--query-tokens", "3"}, []string{"--documents", "--query-tokens"}},
		{[]string{"--batch-size", "4"}, []string{"--batch-size"}},
		{[]string{"--endpoint", "bogus"}, []string{"--endpoint \"bogus\"", "embeddings"}},
		{[]string{"--endpoint", "score", "--source", "sharegpt", "--input", "testdata/synth/sharegpt.json"}, []string{"--source sharegpt"}},
		{[]string{"--endpoint", "completions", "--agent"}, []string{"--agent", "completions"}},
		{[]string{"--endpoint", "embeddings", "--batch-size", "0"}, []string{"--batch-size"}},
		{[]string{"--endpoint", "rerank", "--reasoning-tokens", "5"}, []string{"--reasoning-tokens", "rerank"}},
		{[]string{"--endpoint", "completions", "--reasoning-tokens", "5"}, []string{"--reasoning-tokens", "completions"}},
		{[]string{"--reasoning-tokens", "x"}, []string{"--reasoning-tokens"}},
	} {
		out := filepath.Join(dir, "x.parquet")
		_, stderr, code := runCLI(t, append(append([]string{"synth"}, c.args...), "-o", out)...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, stderr, w)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: wrote a trace", c.args)
		}
	}
	// one turn is what an embeddings request is: --turns 1 is accepted
	rows, _, _ := synthRows(t, dir, "one.parquet", "--endpoint", "embeddings", "--turns", "1", "--conversations", "2")
	if len(rows) != 2 {
		t.Errorf("%d rows", len(rows))
	}
}
