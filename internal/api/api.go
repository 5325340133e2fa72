package api

import "github.com/tracekit/tracekit/trace"

// Name names an inference API. The values are the words the command line
// and the recordings use.
type Name string

// The APIs tracekit speaks.
const (
	Chat        Name = "chat"        // POST /v1/chat/completions
	Completions Name = "completions" // POST /v1/completions
	Responses   Name = "responses"   // POST /v1/responses (OpenAI Responses)
	Messages    Name = "messages"    // POST /v1/messages (Anthropic Messages)
	Embeddings  Name = "embeddings"  // POST /v1/embeddings
	Rerank      Name = "rerank"      // POST /v1/rerank, /rerank, /v2/rerank
	Score       Name = "score"       // POST /v1/score, /score
	// Speech-to-text: a multipart upload of an audio file, a transcript.
	Transcriptions Name = "transcriptions" // POST /v1/audio/transcriptions
	Translations   Name = "translations"   // POST /v1/audio/translations
)

// ErrWrongAPI is the error kind of an answer in another API's shape: chat
// chunks where a Messages stream was asked for, Responses events on a chat
// request, and so on. The server (or a proxy in front of it) routed the
// request elsewhere; nothing it sent can be read as an answer. trace's
// kinds have no such case, so it is defined here.
const ErrWrongAPI trace.ErrorKind = "wrong_api"

// Usage is what a server reports of a request's tokens; -1 in a field means
// not reported.
type Usage struct {
	Prompt     int64 // prompt (input) tokens, cached ones included
	Completion int64 // completion (output) tokens, reasoning included
	Cached     int64 // prompt tokens served from the server's prefix cache
	Reasoning  int64 // reasoning tokens among Completion
	// Media are the prompt tokens the request's media took, by kind, when
	// the server split them out (0: not reported; see MediaTokens).
	Media MediaTokens
}

// MediaTokens are prompt tokens by media kind, as a server's usage splits
// them: vLLM's prompt_tokens_details.multimodal_tokens (keyed image,
// video, audio; with --enable-prompt-tokens-details), OpenAI's
// prompt_tokens_details.audio_tokens. 0 in a field means not reported: a
// server leaves out a kind the request did not carry.
type MediaTokens struct {
	Image, Video, Audio int64
}

// Any reports whether m holds a count.
func (m MediaTokens) Any() bool { return m.Image > 0 || m.Video > 0 || m.Audio > 0 }

// NoUsage is a Usage with nothing reported.
var NoUsage = Usage{Prompt: -1, Completion: -1, Cached: -1, Reasoning: -1}

// Merge sets each field u reports (>= 0) in dst: usage split over events
// (Messages: input side first, output last) adds up, a later count of the
// same field replaces an earlier one.
func (u Usage) Merge(dst *Usage) {
	if u.Prompt >= 0 {
		dst.Prompt = u.Prompt
	}
	if u.Completion >= 0 {
		dst.Completion = u.Completion
	}
	if u.Cached >= 0 {
		dst.Cached = u.Cached
	}
	if u.Reasoning >= 0 {
		dst.Reasoning = u.Reasoning
	}
	for _, f := range [...]struct{ src, dst *int64 }{{&u.Media.Image, &dst.Media.Image}, {&u.Media.Video, &dst.Media.Video}, {&u.Media.Audio, &dst.Media.Audio}} {
		if *f.src > 0 {
			*f.dst = *f.src
		}
	}
}

// Reported reports whether u has any field.
func (u Usage) Reported() bool {
	return u.Prompt >= 0 || u.Completion >= 0 || u.Cached >= 0 || u.Reasoning >= 0
}

// Out is a response's decoded content. The caller (record.Stream) owns it
// and keeps it across responses, so its buffers grow once; decoders only
// append to it.
type Out struct {
	Text      []byte    // the answer's text, concatenated (what the next turn's history carries)
	Reasoning []byte    // reasoning text, concatenated
	Tools     ToolCalls // tool calls being assembled
	// Items is what a non-generating API returned: embeddings, rerank
	// results, scores; -1 when none were counted.
	Items int64
	// ResponseID is the id the server gave the response (Responses:
	// response.created's, or the body's), empty when none came: what a
	// stateful next request names as previous_response_id.
	ResponseID []byte
	// Event is the number the event being decoded gets if it is an
	// output event: the caller sets it before each Decoder call, and tool
	// call argument text is attributed to it.
	Event int
}

// Reset empties o for the next response, keeping its buffers.
func (o *Out) Reset() {
	o.Text, o.Reasoning = o.Text[:0], o.Reasoning[:0]
	o.Tools.Reset()
	o.Items, o.Event = -1, 0
	o.ResponseID = o.ResponseID[:0]
}

// Event is what one event (or a non-streaming body) said, as far as a
// recording cares. The caller clears it (Reset) before each Decoder call.
type Event struct {
	// Output: the event is one of the response's output events, listed
	// with its stamp (chat: a chunk with choices; Responses and Messages:
	// a delta of text, reasoning or tool-call arguments; a non-streaming
	// body that is an answer).
	Output bool
	// Usage is the counts the event reports (each -1 when absent). A
	// decoder whose API splits usage over events reports the counts
	// merged so far.
	Usage Usage
	// End: the API's terminal event (data: [DONE], message_stop,
	// response.completed / incomplete / failed).
	End bool
	// Unknown: an event type the decoder does not know, tolerated.
	Unknown bool
	// Invalid: the data is not one JSON object.
	Invalid bool
	// Fault is a bound the data broke (a tool call index beyond the
	// parser's limit): the event is malformed, Fault says how.
	Fault string
	// ServerError: the event is an error the server reported in the
	// stream (or the body is an error object). ErrType is its type or
	// code ("overloaded_error", "server_error"), ErrMsg its message; both
	// may be empty and point into the decoder's scratch, valid until its
	// next call.
	ServerError bool
	ErrType     []byte
	ErrMsg      []byte
	// WrongAPI names the API whose shape the event has when it is not the
	// decoder's own.
	WrongAPI Name
}

// Reset clears e for the next event.
func (e *Event) Reset() {
	*e = Event{Usage: NoUsage}
}

// Decoder reads one API's responses. record.Stream does the framing (SSE
// lines and events, stamps, size bounds) and calls the decoder of the
// request's API with each complete event. Implementations allocate
// nothing per event once their scratch has grown.
type Decoder interface {
	// Reset readies the decoder for a new response.
	Reset()
	// Event decodes one SSE event: name is its "event:" field (empty
	// when it had none), data its data lines joined with "\n", spaces
	// around trimmed ("[DONE]" included). It appends text to out and says
	// in ev what the event was.
	Event(name, data []byte, out *Out, ev *Event)
	// Body decodes a whole non-streaming response body.
	Body(data []byte, out *Out, ev *Event)
	// Terminal names the event a complete stream of this API ends with,
	// for the message of a stream that lacks it ("data: [DONE]",
	// "message_stop").
	Terminal() string
}

// Finish is how an answer ended, in chat's words (finish_reason); each
// encoder says it in its API's (Messages stop_reason, Responses status).
type Finish string

// How an answer ends.
const (
	FinishStop      Finish = "stop"       // the model ended it (Messages end_turn; Responses completed)
	FinishLength    Finish = "length"     // the token limit (max_tokens; Responses incomplete, max_output_tokens)
	FinishToolCalls Finish = "tool_calls" // it calls tools (tool_use)
)

// Head is what an encoder needs to know of a response before its first
// event.
type Head struct {
	ID      string // the request's id; each API adds its prefix (chatcmpl-, resp_, msg_)
	Model   string
	Created int64 // Unix seconds
	Prompt  int64 // prompt tokens, cached ones included
	Cached  int64 // prompt tokens served from cache
	// Completion is the planned number of output tokens and Finish how
	// the answer will end: chat marks the event that reaches Completion
	// with its finish_reason, as vLLM does.
	Completion int64
	Finish     Finish
	// IncludeUsage and ContinuousUsage are chat's and completions'
	// stream_options (include_usage, vLLM's continuous_usage_stats).
	IncludeUsage, ContinuousUsage bool
}

// Answer is a whole non-streaming answer.
type Answer struct {
	Text      string
	Reasoning string
	ToolCalls []trace.ToolCall
	Usage     Usage
	Finish    Finish
}

// Encoder writes responses in one API's wire format: the mock's side.
// Every method appends to dst and returns it; once dst and the encoder's
// own buffers have grown, nothing is allocated. An encoder keeps the
// state of one response (open items, sequence numbers), so it belongs to
// one stream at a time and Begin starts the next.
//
// A streamed response is Begin, then any run of Reasoning, Text, ToolCall
// and ToolArgs calls (each appends the events of one network write; the
// tokens argument is how many output tokens that piece is), then End and
// Done. Done appends only the terminal event, so a fault can leave it out.
type Encoder interface {
	// Begin starts a streamed response: it appends the events that open
	// it (chat: the role chunk; Responses: response.created and
	// response.in_progress; Messages: message_start and a ping).
	Begin(dst []byte, h *Head) []byte
	// Reasoning and Text append an event carrying a piece of the
	// reasoning or the answer text. An API without reasoning in its
	// stream (completions) appends nothing for Reasoning.
	Reasoning(dst []byte, text []byte, tokens int) []byte
	Text(dst []byte, text []byte, tokens int) []byte
	// ToolCall starts a tool call with its id, function name and first
	// argument fragment (may be empty); ToolArgs appends an event with
	// the next fragment of the call last started.
	ToolCall(dst []byte, id, name string, args []byte, tokens int) []byte
	ToolArgs(dst []byte, args []byte, tokens int) []byte
	// End closes what is open and appends the events that carry the
	// usage and the finish, all but the terminal one.
	End(dst []byte, u Usage) []byte
	// Done appends the terminal event (data: [DONE], message_stop,
	// response.completed or response.incomplete).
	Done(dst []byte) []byte
	// Error appends an in-stream error event of the API's shape with the
	// error's type and message.
	Error(dst []byte, typ, msg string) []byte
	// Body appends a whole non-streaming response.
	Body(dst []byte, h *Head, a *Answer) []byte
}
