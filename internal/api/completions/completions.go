// Package completions is the /v1/completions API. Its stream is chat's
// chunk format with choices[].text in place of choices[].delta, so it
// decodes with chat's decoder (one decoder reads both, as record always
// has); what is its own is the encoding: text_completion objects, no
// reasoning, no tool calls.
//
// In: a completion response (decoded by chat.Decoder). Out, for the mock:
// a completion stream or body (Encoder).
package completions

import (
	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/chat"
)

// NewDecoder returns the decoder of completion responses: chat's.
func NewDecoder() api.Decoder { return chat.NewDecoder() }

// NewEncoder returns the mock's encoder of completion streams and bodies.
func NewEncoder() api.Encoder { return chat.NewCompletionsEncoder() }
