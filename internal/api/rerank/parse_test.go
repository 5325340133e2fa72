package rerank

import (
	"reflect"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest and ParseScoreRequest read back what their encoders
// wrote; documents may also be objects with a text, text_2 one string.
func TestParseRequest(t *testing.T) {
	msgs := []trace.Message{{Role: trace.RoleQuery, Content: "which?"}, {Role: trace.RoleDocument, Content: "d1"}, {Role: trace.RoleDocument, Content: "d\n2"}}
	for name, f := range map[string]struct {
		enc   func([]byte, *api.Request, []trace.Message) []byte
		parse func([]byte) (*api.Call, error)
	}{"rerank": {AppendRequest, ParseRequest}, "score": {AppendScoreRequest, ParseScoreRequest}} {
		body := f.enc(nil, &api.Request{Model: "r"}, msgs)
		c, err := f.parse(body)
		if err != nil || c.Model != "r" || !reflect.DeepEqual(c.Messages, msgs) {
			t.Errorf("%s %s: %+v, %v", name, body, c, err)
		}
	}
	c, err := ParseRequest([]byte(`{"query":"q","documents":[{"text":"a"},"b"]}`))
	want := []trace.Message{{Role: trace.RoleQuery, Content: "q"}, {Role: trace.RoleDocument, Content: "a"}, {Role: trace.RoleDocument, Content: "b"}}
	if err != nil || !reflect.DeepEqual(c.Messages, want) {
		t.Errorf("objects: %+v, %v", c, err)
	}
	c, err = ParseScoreRequest([]byte(`{"text_1":"q","text_2":"a"}`))
	if err != nil || !reflect.DeepEqual(c.Messages, want[:1:1]) && len(c.Messages) != 2 {
		t.Errorf("one text_2: %+v, %v", c, err)
	}
	if _, err := ParseRequest([]byte(`{"query":"q","documents":[1]}`)); err == nil {
		t.Error("a document that is a number parsed")
	}
}
