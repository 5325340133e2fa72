package replay

import (
	"errors"
	"testing"

	"github.com/tracekit/tracekit/internal/fielderr"
)

// Each enum parses its own values, refuses others with a fielderr.Error
// naming the Config field, and New refuses a bad value the same way.
func TestParseEnums(t *testing.T) {
	if v, err := ParseTiming("trace"); v != TimingTrace || err != nil {
		t.Errorf("ParseTiming(trace) = %q, %v", v, err)
	}
	if v, err := ParseHistory("reference"); v != HistoryReference || err != nil {
		t.Errorf("ParseHistory(reference) = %q, %v", v, err)
	}
	if v, err := ParsePolicy("conversation"); v != PolicyConversation || err != nil {
		t.Errorf("ParsePolicy(conversation) = %q, %v", v, err)
	}
	if v, err := ParseEndpoint("completions"); v != EndpointCompletions || err != nil {
		t.Errorf("ParseEndpoint(completions) = %q, %v", v, err)
	}
	for _, c := range []struct {
		parse func(string) error
		field string
		msg   string
	}{
		{func(s string) error { _, err := ParseTiming(s); return err }, "Timing", `Timing "x": expected one of closed, trace`},
		{func(s string) error { _, err := ParseHistory(s); return err }, "History", `History "x": expected one of actual, reference`},
		{func(s string) error { _, err := ParsePolicy(s); return err }, "Policy", `Policy "x": expected one of round-robin, conversation`},
		{func(s string) error { _, err := ParseEndpoint(s); return err }, "Endpoint", `Endpoint "x": expected one of chat, completions, responses, messages, embeddings, rerank, score, transcriptions, translations`},
	} {
		var fe *fielderr.Error
		if err := c.parse("x"); !errors.As(err, &fe) || fe.Struct != "replay.Config" || fe.Field != c.field || err.Error() != c.msg {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	_, err := New(Config{Trace: "t.parquet", Targets: []string{"http://127.0.0.1:1"}, Timing: "sometimes"}, nil)
	var fe *fielderr.Error
	if !errors.As(err, &fe) || fe.Field != "Timing" {
		t.Errorf("New with a bad Timing: %v", err)
	}
}

// The session options refuse what they cannot send, naming the field.
func TestSessionOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{SessionField: "email"}, "SessionField"},
		{Config{SessionHeader: "X Session"}, "SessionHeader"},
		{Config{SessionPerAgent: true}, "SessionPerAgent"},
		{Config{SessionField: "user", ExtraBody: `{"user":"me"}`}, "ExtraBody"},
	} {
		c.cfg.Trace, c.cfg.Targets = "t.parquet", []string{"http://127.0.0.1:1"}
		_, err := New(c.cfg, nil)
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.field)
		}
	}
}

// The session key is the conversation's, or with perAgent the agent
// context's for a context other than the conversation's first.
func TestAppendSessionKey(t *testing.T) {
	for _, c := range []struct {
		agent    int32
		perAgent bool
		want     string
	}{{0, false, "conv-1"}, {5, false, "conv-1"}, {0, true, "conv-1"}, {5, true, "conv-1/agent-5"}} {
		if got := string(appendSessionKey(nil, "conv-1", c.agent, c.perAgent)); got != c.want {
			t.Errorf("agent %d, per agent %v: %q, want %q", c.agent, c.perAgent, got, c.want)
		}
	}
}
