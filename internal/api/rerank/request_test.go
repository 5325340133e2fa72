package rerank

import (
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

func TestAppendRequests(t *testing.T) {
	msgs := []trace.Message{{Role: trace.RoleQuery, Content: "q"}, {Role: trace.RoleDocument, Content: "a"}, {Role: trace.RoleDocument, Content: "b\n"}}
	r := &api.Request{Model: "m"}
	if b, want := AppendRequest(nil, r, msgs), `{"model":"m","query":"q","documents":["a","b\n"]}`; string(b) != want {
		t.Errorf("rerank %s; want %s", b, want)
	}
	if b, want := AppendScoreRequest(nil, r, msgs), `{"model":"m","text_1":"q","text_2":["a","b\n"]}`; string(b) != want {
		t.Errorf("score %s; want %s", b, want)
	}
}
