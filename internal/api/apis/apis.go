// Package apis is the table of the APIs tracekit speaks: each API's name,
// the request paths it is served on, whether it streams, and how to make
// its decoder and encoder. It is the one place that lists them: adding an
// API is its package under internal/api and one entry here.
//
// In: an API's name (a flag, a recording) or a request path (capture).
// Out: its Spec.
package apis

import (
	"strings"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/chat"
	"github.com/tracekit/tracekit/internal/api/completions"
	"github.com/tracekit/tracekit/internal/api/embeddings"
	"github.com/tracekit/tracekit/internal/api/messages"
	"github.com/tracekit/tracekit/internal/api/rerank"
	"github.com/tracekit/tracekit/internal/api/responses"
	"github.com/tracekit/tracekit/internal/api/transcription"
)

// Spec is one API's entry.
type Spec struct {
	Name api.Name
	// Paths are the request paths it is served on, the canonical one
	// first; ByPath matches them as suffixes of a request path.
	Paths []string
	// Streams: the API answers with an event stream when asked to.
	Streams    bool
	NewDecoder func() api.Decoder
	// NewEncoder makes the mock's encoder of a generating API; nil for
	// the others (their packages have body encoders of their own shape).
	NewEncoder func() api.Encoder
	// ParseRequest reads a request body into what a trace turn needs
	// (capture records each request with it).
	ParseRequest func(body []byte) (*api.Call, error)
}

// table lists the APIs; order matters to ByPath (a longer suffix first).
var table = []Spec{
	{Name: api.Chat, Paths: []string{"/v1/chat/completions", "/chat/completions"}, Streams: true,
		NewDecoder: func() api.Decoder { return chat.NewDecoder() }, NewEncoder: func() api.Encoder { return chat.NewEncoder() },
		ParseRequest: chat.ParseRequest},
	{Name: api.Completions, Paths: []string{"/v1/completions", "/completions"}, Streams: true,
		NewDecoder: completions.NewDecoder, NewEncoder: func() api.Encoder { return completions.NewEncoder() },
		ParseRequest: completions.ParseRequest},
	{Name: api.Responses, Paths: []string{"/v1/responses", "/responses"}, Streams: true,
		NewDecoder: func() api.Decoder { return responses.NewDecoder() }, NewEncoder: func() api.Encoder { return responses.NewEncoder() },
		ParseRequest: responses.ParseRequest},
	{Name: api.Messages, Paths: []string{"/v1/messages", "/messages"}, Streams: true,
		NewDecoder: func() api.Decoder { return messages.NewDecoder() }, NewEncoder: func() api.Encoder { return messages.NewEncoder() },
		ParseRequest: messages.ParseRequest},
	{Name: api.Embeddings, Paths: []string{"/v1/embeddings", "/embeddings"},
		NewDecoder: func() api.Decoder { return embeddings.NewDecoder() }, ParseRequest: embeddings.ParseRequest},
	{Name: api.Rerank, Paths: []string{"/v1/rerank", "/v2/rerank", "/rerank"},
		NewDecoder: func() api.Decoder { return rerank.NewDecoder() }, ParseRequest: rerank.ParseRequest},
	{Name: api.Score, Paths: []string{"/v1/score", "/score"},
		NewDecoder: func() api.Decoder { return rerank.NewScoreDecoder() }, ParseRequest: rerank.ParseScoreRequest},
	{Name: api.Transcriptions, Paths: []string{"/v1/audio/transcriptions", "/audio/transcriptions"}, Streams: true,
		NewDecoder:   func() api.Decoder { return transcription.NewDecoder() },
		NewEncoder:   func() api.Encoder { return transcription.NewEncoder(transcription.ShapeVLLM, false) },
		ParseRequest: transcription.ParseRequest},
	{Name: api.Translations, Paths: []string{"/v1/audio/translations", "/audio/translations"}, Streams: true,
		NewDecoder:   func() api.Decoder { return transcription.NewDecoder() },
		NewEncoder:   func() api.Encoder { return transcription.NewEncoder(transcription.ShapeVLLM, true) },
		ParseRequest: transcription.ParseRequest},
}

// Lookup returns the Spec of the API named name.
func Lookup(name api.Name) (*Spec, bool) {
	for i := range table {
		if table[i].Name == name {
			return &table[i], true
		}
	}
	return nil, false
}

// ByPath returns the Spec of the API a request path is for (its path
// without the query), matching the table's paths as suffixes, so a prefix
// a proxy adds (/openai/v1/chat/completions) does not matter.
func ByPath(path string) (*Spec, bool) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimSuffix(path, "/")
	for i := range table {
		for _, p := range table[i].Paths {
			if strings.HasSuffix(path, p) {
				return &table[i], true
			}
		}
	}
	return nil, false
}

// All returns the table, in a fixed order.
func All() []Spec { return table }
