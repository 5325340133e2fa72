package responses_test

import (
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/responses"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads back what AppendRequest wrote.
func TestParseRequestInvertsAppendRequest(t *testing.T) {
	apitest.CheckParse(t, func(dst []byte, r *api.Request, msgs []trace.Message) []byte {
		return responses.AppendRequest(dst, r, nil, msgs)
	}, responses.ParseRequest)
}

// What clients send beyond replay's shape: a plain string input, content
// parts, reasoning items (dropped), previous_response_id.
func TestParseRequestClientShapes(t *testing.T) {
	c, err := responses.ParseRequest([]byte(`{"model":"g","input":"hi","stream":true}`))
	if err != nil || len(c.Messages) != 1 || c.Messages[0].Role != "user" || c.Messages[0].Content != "hi" || !c.Stream {
		t.Fatalf("string input: %+v, %v", c, err)
	}
	c, err = responses.ParseRequest([]byte(`{"model":"g","previous_response_id":"resp_7","input":[` +
		`{"type":"reasoning","id":"rs_1","summary":[]},` +
		`{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`))
	if err != nil || c.PreviousResponseID != "resp_7" || len(c.Messages) != 1 || c.Messages[0].Content != "ab" {
		t.Fatalf("items: %+v, %v", c, err)
	}
	if _, err := responses.ParseRequest([]byte(`{"input":[1]}`)); err == nil {
		t.Error("an input of numbers parsed")
	}
}
