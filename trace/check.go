package trace

import (
	"encoding/json"
	"fmt"
)

// Check validates what replay sends from a turn without looking at it
// again: Tools is a JSON array, ToolChoice a JSON string or object,
// every parent an earlier turn of the conversation or RootParent, and
// every After turn an earlier turn. Readers
// call it once per row, so the request encoder can copy the JSON as it is.
func (t *Turn) Check() error {
	if t.Tools != "" {
		if !json.Valid([]byte(t.Tools)) || firstByte(t.Tools) != '[' {
			return fmt.Errorf("conversation %q turn %d: tools: expected a JSON array, got %s", t.ConversationID, t.Turn, quoteStart(t.Tools))
		}
	}
	if t.ToolChoice != "" {
		if c := firstByte(t.ToolChoice); !json.Valid([]byte(t.ToolChoice)) || (c != '"' && c != '{') {
			return fmt.Errorf("conversation %q turn %d: tool_choice: expected a JSON string or object, got %s", t.ConversationID, t.Turn, quoteStart(t.ToolChoice))
		}
	}
	for _, p := range t.Parents {
		if p < RootParent || p >= t.Turn {
			return fmt.Errorf("conversation %q turn %d: parent %d: expected an earlier turn (0..%d) or %d (the conversation start)", t.ConversationID, t.Turn, p, t.Turn-1, RootParent)
		}
	}
	for _, a := range t.After {
		if a < 0 || a >= t.Turn {
			return fmt.Errorf("conversation %q turn %d: after %d: expected an earlier turn (0..%d)", t.ConversationID, t.Turn, a, t.Turn-1)
		}
	}
	return nil
}

// firstByte is the first non-space byte of a JSON text, 0 if none.
func firstByte(s string) byte {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return s[i]
		}
	}
	return 0
}

func quoteStart(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q...", s[:60])
	}
	return fmt.Sprintf("%q", s)
}
