package rerank

import (
	"encoding/json"
	"fmt"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads a rerank request body (the inverse of
// AppendRequest): "query" as a trace.RoleQuery message, then each of
// "documents" (strings, or objects with a "text") as a
// trace.RoleDocument message.
func ParseRequest(body []byte) (*api.Call, error) {
	return parsePair(body, "query", "documents")
}

// ParseScoreRequest reads a /v1/score request body (the inverse of
// AppendScoreRequest): text_1 the query, text_2 (one text or a list) the
// documents.
func ParseScoreRequest(body []byte) (*api.Call, error) {
	return parsePair(body, "text_1", "text_2")
}

func parsePair(body []byte, queryKey, docsKey string) (*api.Call, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	c := &api.Call{}
	if m, ok := req["model"]; ok {
		if err := json.Unmarshal(m, &c.Model); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	texts := func(key string) ([]string, error) {
		raw, ok := req[key]
		if !ok || string(raw) == "null" {
			return nil, nil
		}
		var one string
		if json.Unmarshal(raw, &one) == nil {
			return []string{one}, nil
		}
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("%s: want a string or a list: %w", key, err)
		}
		out := make([]string, 0, len(list))
		for i, it := range list {
			var doc struct {
				Text string `json:"text"`
			}
			switch {
			case json.Unmarshal(it, &one) == nil:
				out = append(out, one)
			case json.Unmarshal(it, &doc) == nil:
				out = append(out, doc.Text)
			default:
				return nil, fmt.Errorf("%s[%d]: want a string or an object with a text", key, i)
			}
		}
		return out, nil
	}
	q, err := texts(queryKey)
	if err != nil {
		return nil, err
	}
	docs, err := texts(docsKey)
	if err != nil {
		return nil, err
	}
	for _, s := range q {
		c.Messages = append(c.Messages, trace.Message{Role: trace.RoleQuery, Content: s})
	}
	for _, s := range docs {
		c.Messages = append(c.Messages, trace.Message{Role: trace.RoleDocument, Content: s})
	}
	return c, nil
}
