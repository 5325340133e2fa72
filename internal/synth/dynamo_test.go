package synth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func importDynamo(t *testing.T, text string) ([]Conversation, *Dynamo, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seg.000001.jsonl")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewDynamo(DynamoOptions{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	convs, err := s.Conversations(context.Background())
	return convs, s, err
}

const dynRowFmt = `{"schema":"dynamo.request.trace.v1","event_type":"request_end",%s"request":{"input_tokens":%s,"output_tokens":3,"request_received_ms":%s,"total_time_ms":100,"replay":{"trace_block_size":16,"input_length":%s,"input_sequence_hashes":[7,8]}}}`

// sprintfRow is a request_end row with agent context ctx (a JSON member
// and comma, or ""), input tokens in, received at ms, two hash blocks.
func sprintfRow(ctx, in, at string) string {
	r := dynRowFmt
	for _, v := range []string{ctx, in, at, in} {
		r = strings.Replace(r, "%s", v, 1)
	}
	return r
}

// Rows without agent_context are single requests at their received time,
// their prompts virtual with the recorded hash blocks.
func TestDynamoOpenLoop(t *testing.T) {
	convs, s, err := importDynamo(t, sprintfRow("", "20", "5000")+"\n"+sprintfRow("", "30", "5250")+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 2 || convs[1][0].ArrivalOffsetNs != 250e6 || convs[1][0].StartOffsetNs != 250e6 || convs[0][0].InputTokens != 20 {
		t.Fatalf("convs %+v", convs)
	}
	if m := convs[0][0].Messages[0]; !m.Virtual || m.Tokens != 20 || len(convs[0][0].PrefixHashes) != 2 {
		t.Errorf("turn %+v", convs[0][0])
	}
	if p := s.Prompts(); p == nil || p.BlockSize != 16 {
		t.Errorf("prompts %+v", p)
	}
}

// Bad input names the file, line and field; a trace mixing agent rows and
// plain rows is refused.
func TestDynamoBadInput(t *testing.T) {
	agent := `"agent_context":{"session_id":"s"},`
	for _, c := range []struct{ text, want string }{
		{sprintfRow(agent, "20", "5000") + "\n" + sprintfRow("", "20", "5100"), `line 2: field "agent_context"`},
		{`{"schema":"other","event_type":"request_end"}`, `line 1: field "schema"`},
		{`{"schema":"dynamo.request.trace.v1","event_type":"request_end","request":{"input_tokens":5}}`, `field "request.request_received_ms"`},
		{`{"schema":`, `line 1`},
	} {
		_, _, err := importDynamo(t, c.text+"\n")
		var re *RowError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "seg.000001.jsonl") {
			t.Errorf("%s: error %v, want a row error with %q", c.text, err, c.want)
		}
	}
	if _, _, err := importDynamo(t, sprintfRow("", "10", "5000")+"\n"); err == nil || !strings.Contains(err.Error(), "input_sequence_hashes") {
		t.Errorf("2 hashes for 10 tokens in blocks of 16: %v", err)
	}
}
