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
	clip := []trace.Message{{Role: "user", Content: "names", Media: []trace.Media{{Kind: trace.MediaAudio, Format: "wav", DurationMs: 500}}}}
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
		{"unknown", trace.Turn{Endpoint: "speech", Messages: user}, "", false, `endpoint "speech": expected one of chat`},
		{"tools on embeddings", trace.Turn{Messages: user, Tools: `[]`}, EndpointEmbeddings, true, "calls tools"},
		{"graph on score", trace.Turn{Turn: 1, Parents: []int32{0}, Messages: rr}, EndpointScore, true, "agent graph"},
		{"rerank without documents", trace.Turn{Endpoint: "rerank", Messages: rr[:1]}, "", false, "1 query and 0 document"},
		{"speech", trace.Turn{Endpoint: "transcriptions", Messages: clip}, "", false, ""},
		{"speech without text", trace.Turn{Messages: []trace.Message{{Role: "user", Media: clip[0].Media}}}, EndpointTranslations, true, ""},
		{"speech without audio", trace.Turn{Messages: user}, EndpointTranscriptions, true, "0 audio clips"},
		{"speech with an image", trace.Turn{Messages: []trace.Message{{Role: "user", Media: []trace.Media{{Kind: trace.MediaImage, Format: "png", Width: 8, Height: 8}}}}}, EndpointTranscriptions, true, "image media"},
		{"tools on speech", trace.Turn{Messages: clip, Tools: `[]`}, EndpointTranscriptions, true, "calls tools"},
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
