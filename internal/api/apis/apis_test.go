package apis

import (
	"testing"

	"github.com/tracekit/tracekit/internal/api"
)

// Every API has a decoder and a request parser; the
// generating ones an encoder; request paths
// find their API whatever prefix a proxy adds, and nothing else matches.
func TestTable(t *testing.T) {
	for _, name := range []api.Name{api.Chat, api.Completions, api.Responses, api.Messages, api.Embeddings, api.Rerank, api.Score, api.Transcriptions, api.Translations} {
		s, ok := Lookup(name)
		if !ok || s.NewDecoder() == nil {
			t.Fatalf("%s: no entry or no decoder", name)
		}
		if s.ParseRequest == nil {
			t.Errorf("%s: no request parser", name)
		}
		if (s.NewEncoder != nil) != s.Streams {
			t.Errorf("%s: streams %v but encoder %v", name, s.Streams, s.NewEncoder != nil)
		}
		if got, ok := ByPath(s.Paths[0]); !ok || got.Name != name {
			t.Errorf("%s: its own path %s finds %v", name, s.Paths[0], got)
		}
	}
	for path, want := range map[string]api.Name{
		"/v1/chat/completions": api.Chat, "/openai/v1/chat/completions?x=1": api.Chat, "/v1/completions": api.Completions,
		"/v1/responses": api.Responses, "/v1/messages": api.Messages, "/v1/messages/": api.Messages,
		"/v1/embeddings": api.Embeddings, "/rerank": api.Rerank, "/v2/rerank": api.Rerank, "/score": api.Score,
		"/v1/audio/transcriptions": api.Transcriptions, "/openai/v1/audio/translations": api.Translations,
	} {
		if got, ok := ByPath(path); !ok || got.Name != want {
			t.Errorf("ByPath(%q) = %v, want %s", path, got, want)
		}
	}
	for _, path := range []string{"/v1/messages/count_tokens", "/v1/models", "/metrics", "/v1/responses/resp_1", ""} {
		if got, ok := ByPath(path); ok {
			t.Errorf("ByPath(%q) = %s, want none", path, got.Name)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}
