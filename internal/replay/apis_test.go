package replay

import (
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// New refuses, naming the conversation, the turn and why, a turn its
// endpoint cannot carry: whether the trace or --endpoint chose it.
func TestCheckEndpoints(t *testing.T) {
	user := []trace.Message{{Role: "user", Content: "hi"}}
	rr := []trace.Message{{Role: trace.RoleQuery, Content: "q"}, {Role: trace.RoleDocument, Content: "d"}}
	for _, c := range []struct {
		name     string
		turn     trace.Turn
		endpoint Endpoint
		override bool
		want     string // "" accepted
	}{
		{"chat", trace.Turn{Messages: user}, "", false, ""},
		{"rerank own", trace.Turn{Endpoint: "rerank", Messages: rr}, "", false, ""},
		{"rerank on chat", trace.Turn{Endpoint: "rerank", Messages: rr}, EndpointChat, true, `message 0 has role "query"`},
		{"unknown", trace.Turn{Endpoint: "transcriptions", Messages: user}, "", false, `endpoint "transcriptions": expected one of chat`},
		{"tools on embeddings", trace.Turn{Messages: user, Tools: `[]`}, EndpointEmbeddings, true, "calls tools"},
		{"graph on score", trace.Turn{Turn: 1, Parents: []int32{0}, Messages: rr}, EndpointScore, true, "agent graph"},
		{"rerank without documents", trace.Turn{Endpoint: "rerank", Messages: rr[:1]}, "", false, "1 query and 0 document"},
		{"assistant on embeddings", trace.Turn{Endpoint: "embeddings", Messages: []trace.Message{{Role: "assistant", Content: "a"}}}, "", false, `role "assistant"`},
	} {
		c.turn.ConversationID = "c"
		turns := []trace.Turn{c.turn}
		if c.turn.Turn == 1 {
			turns = []trace.Turn{{ConversationID: "c", Messages: rr}, c.turn}
		}
		_, err := New(Config{Targets: []string{"http://127.0.0.1:1"}, Endpoint: c.endpoint, EndpointOverride: c.override},
			NewMemorySource(trace.TraceMeta{Tokenizer: "o200k_base"}, turns))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), `conversation "c" turn `)):
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.want)
		}
	}
}
