// Package api is what every inference API tracekit speaks has in common:
// the name of an API, the decoder interface record.Stream calls for each
// event of a response, the encoder interface the mock writes responses
// with, and the shared pieces (usage, tool-call assembly, the error kind
// of an answer in another API's shape). Each API has one package beneath
// it that owns everything about its wire format:
//
//	api/chat         /v1/chat/completions (and its chunk format, which /v1/completions shares)
//	api/completions  /v1/completions
//	api/responses    /v1/responses (OpenAI Responses)
//	api/messages     /v1/messages (Anthropic Messages)
//	api/embeddings   /v1/embeddings (not streamed)
//	api/rerank       /v1/rerank, /rerank, /v2/rerank, and /v1/score (not streamed)
//	api/transcription /v1/audio/transcriptions and translations (multipart upload; OpenAI's or vLLM's stream)
//	api/apitest      the tests' driver: encoder, then record.Stream, then checks
//	api/apis         the table of them: by name, by request path
//	api/jsonscan     the allocation-free JSON scanner every decoder uses
//
// Data flows so for a response:
//
//	record.Stream: SSE framing, stamps, buffers
//	    │ each event: (event name, data)             Decoder.Event
//	    │ a non-streaming body                       Decoder.Body
//	    ▼
//	Decoder ──> Out   answer text, reasoning, tool calls (appended: the Stream's buffers)
//	        ──> Event what this event was: output or not, usage, the end,
//	                  an error (the server's type and words), another API's
//	                  shape, an event type the decoder does not know
//
// and for the mock the other way: Encoder.Begin, then Text, Reasoning,
// ToolCall, ToolArgs per event, End and Done, or Body for a whole answer,
// all appending to the caller's buffer.
//
// The request side is each package's too. Chat and completions write a
// body in pieces (AppendRequestHead, AppendRequestMessage per message,
// AppendRequestTail), so replay keeps a conversation's messages encoded
// once and copies them into each turn's body. The others have one
// AppendRequest: from an api.Request (model, limits, the turn's
// chat-shaped tools and tool_choice, rewritten into the API's shape, and
// the run's options) and the conversation's trace.Messages it appends the
// whole body.
//
// The non-generating APIs (embeddings, rerank, score) share one body
// parser, ListDecoder, told by each package which member holds its items.
// A decoder keeps a server's error words as they came; record.Stream
// passes them through redact.Patterns before they reach a record.
//
// A decoder allocates nothing per event once the buffers it writes into
// have grown: it walks the event's bytes with jsonscan and appends decoded
// text to the Out it was given; scratch it needs (an error message, a tool
// call's id) lives in the decoder, reused across responses. Decoders and
// encoders keep per-response state, so each belongs to one Stream (one
// goroutine) and is readied with Reset or Begin.
//
// Unknown event types are tolerated, as both the OpenAI and the Anthropic
// streaming documentation ask of clients: the decoder sets Event.Unknown
// and the Stream counts them; they never fail a response.
package api
