package embeddings_test

import (
	"reflect"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/embeddings"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads back what AppendRequest wrote, and the input shapes
// clients send: one string, token ids (virtual inputs of their length).
func TestParseRequest(t *testing.T) {
	in := []trace.Message{{Role: trace.RoleInput, Content: "first"}, {Role: trace.RoleInput, Content: "second \"one\""}}
	body := embeddings.AppendRequest(nil, &api.Request{Model: "e"}, in)
	c, err := embeddings.ParseRequest(body)
	if err != nil || c.Model != "e" || !reflect.DeepEqual(c.Messages, in) || c.Stream || c.Conversation {
		t.Fatalf("%s: %+v, %v", body, c, err)
	}
	for body, want := range map[string][]trace.Message{
		`{"input":"one"}`:           {{Role: trace.RoleInput, Content: "one"}},
		`{"input":[1,2,3]}`:         {{Role: trace.RoleInput, Tokens: 3, Virtual: true}},
		`{"input":[[1,2],"x",[5]]}`: {{Role: trace.RoleInput, Tokens: 2, Virtual: true}, {Role: trace.RoleInput, Content: "x"}, {Role: trace.RoleInput, Tokens: 1, Virtual: true}},
	} {
		c, err := embeddings.ParseRequest([]byte(body))
		if err != nil || !reflect.DeepEqual(c.Messages, want) {
			t.Errorf("%s: %+v, %v; want %+v", body, c, err, want)
		}
	}
	if _, err := embeddings.ParseRequest([]byte(`{"input":[{"a":1}]}`)); err == nil {
		t.Error("an input of objects parsed")
	}
}
