package embeddings

import (
	"encoding/json"
	"fmt"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// ParseRequest reads a /v1/embeddings request body (the inverse of
// AppendRequest): one trace.RoleInput message per input. "input" is a
// string, an array of strings, an array of token ids (one input) or an
// array of such arrays; a token-id input has no text, so it becomes a
// virtual message of its length, whose text replay makes.
func ParseRequest(body []byte) (*api.Call, error) {
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	c := &api.Call{Model: req.Model}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		c.Messages = []trace.Message{{Role: trace.RoleInput, Content: s}}
		return c, nil
	}
	var ids []int64
	if json.Unmarshal(req.Input, &ids) == nil {
		c.Messages = []trace.Message{tokensInput(len(ids))}
		return c, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, fmt.Errorf("input: want a string, strings or token ids: %w", err)
	}
	for i, it := range items {
		if json.Unmarshal(it, &s) == nil {
			c.Messages = append(c.Messages, trace.Message{Role: trace.RoleInput, Content: s})
			continue
		}
		if json.Unmarshal(it, &ids) != nil {
			return nil, fmt.Errorf("input[%d]: want a string or token ids", i)
		}
		c.Messages = append(c.Messages, tokensInput(len(ids)))
	}
	return c, nil
}

// tokensInput is an input given as n token ids: a virtual message of n
// tokens.
func tokensInput(n int) trace.Message {
	return trace.Message{Role: trace.RoleInput, Tokens: int32(n), Virtual: true}
}
