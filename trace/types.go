package trace

// Format names stored under MetaFormat, and the schema versions this build
// writes and can read.
const (
	FormatTrace     = "tracekit.trace"
	FormatRecording = "tracekit.recording"

	// TraceSchemaVersion 2 adds tool calls, tool definitions and graph
	// parents (agentic traffic) and virtual prompts; version 1 files read
	// with those columns empty, which is what they meant. Version 3 adds
	// wait-only edges (Turn.After): a reader that ignored them would send
	// a node without waiting, so a trace is stamped 3 only when a row
	// holds one (traceVersionAfter) and 2 otherwise, which every version-2
	// reader replays exactly. Version 4 adds Turn.Endpoint, stamped only
	// on a trace with a turn for an API other than chat or completions (a
	// version-3 reader would send it as a chat). Version 5 adds media
	// (Message.Media), stamped only on a trace that holds some (a version-4
	// reader would send the text alone).
	TraceSchemaVersion = 5
	// RecordingSchemaVersion 2 adds each request's graph parents and its
	// answer's tool calls (parents, tool_calls, tool_call_mismatch);
	// version 1 recordings read with them empty: chats. Version 3 adds
	// Record.After, stamped only on a recording that holds one (a
	// version-2 reader would build session graphs without those edges).
	// Version 4 adds each request's API and what APIs beyond chat report
	// (endpoint, reasoning_tokens, first_answer_event, items), stamped only
	// on a recording that needs them (see Record.needsV4). Version 5 adds
	// what a request with media sent (write_start_ns, request_bytes,
	// media_items, media_bytes) and a request's own model (model), stamped
	// only on a recording with media or a model per request. Version 6
	// stores the event times as gaps (event_gap_ns: the first event after
	// sent_ns, each next after the one before) in place of the absolute
	// event_ns, which delta-encodes to about half the bytes; stamped on a
	// recording with an event (a recording without one reads the same
	// either way). Version 7 keeps them to the microsecond (event_gap_us:
	// each event's offset from sent_ns rounded to a whole microsecond,
	// stored as gaps; see RoundUs): every event time reads back within
	// 500 ns of its stamp, below the stamps' own accuracy, and the ten
	// low bits of noise per gap are no longer stored; stamped on a
	// recording with an event. Version 8 stores the same whole
	// microseconds in event_gap_us as doubles, BYTE_STREAM_SPLIT encoded,
	// in place of delta-encoded int64s: about half the bytes on a served
	// model's steady stream; stamped on a recording with an event (a
	// version-7 reader expects integers there).
	// Readers take the layout from the column the file holds (event_gap_us
	// of DOUBLE or of INT64, event_gap_ns or event_ns; gaps.go) and refuse
	// a file with two of them.
	RecordingSchemaVersion = 8
)

// The versions a file is stamped with when no row needs a newer one: the
// trace and recording formats before Turn.After / Record.After, and the
// versions that added them.
const (
	traceVersionBase      = 2
	recordingVersionBase  = 2
	traceVersionAfter     = 3
	recordingVersionAfter = 3
	traceVersionEndpoint  = 4
	recordingVersionAPIs  = 4
	recordingVersionMedia = 5
)

// Endpoints: the APIs a turn can be sent on (Turn.Endpoint, Record.Endpoint).
const (
	EndpointChat        = "chat"        // OpenAI /v1/chat/completions
	EndpointCompletions = "completions" // OpenAI /v1/completions
	EndpointResponses   = "responses"   // OpenAI /v1/responses
	EndpointMessages    = "messages"    // Anthropic /v1/messages
	EndpointEmbeddings  = "embeddings"  // OpenAI /v1/embeddings
	EndpointRerank      = "rerank"      // /v1/rerank (Jina/Cohere shape, vLLM, llama.cpp, TEI)
	EndpointScore       = "score"       // vLLM /v1/score
	// Speech-to-text: the turn's audio clip uploaded, its transcript
	// (or English translation) generated.
	EndpointTranscriptions = "transcriptions" // OpenAI /v1/audio/transcriptions
	EndpointTranslations   = "translations"   // OpenAI /v1/audio/translations
)

// Endpoints lists every endpoint name, in the order documents list them.
var Endpoints = []string{EndpointChat, EndpointCompletions, EndpointResponses, EndpointMessages,
	EndpointEmbeddings, EndpointRerank, EndpointScore, EndpointTranscriptions, EndpointTranslations}

// KnownEndpoint reports whether e names an endpoint ("" does not).
func KnownEndpoint(e string) bool {
	for _, k := range Endpoints {
		if e == k {
			return true
		}
	}
	return false
}

// Generates reports whether requests to endpoint e generate tokens
// (chat, completions, responses, messages; "" is chat or completions):
// embeddings, rerank and score answer one body of scores or vectors.
func Generates(e string) bool {
	return e != EndpointEmbeddings && e != EndpointRerank && e != EndpointScore
}

// CarriesMedia reports whether requests to endpoint e can carry media of
// kind (MediaImage, MediaVideo, MediaAudio): chat ("" included) all
// three; Responses and Messages images only; transcriptions and
// translations audio only; the others none.
func CarriesMedia(e, kind string) bool {
	switch e {
	case "", EndpointChat:
		return kind == MediaImage || kind == MediaVideo || kind == MediaAudio
	case EndpointResponses, EndpointMessages:
		return kind == MediaImage
	case EndpointTranscriptions, EndpointTranslations:
		return kind == MediaAudio
	}
	return false
}

// Message roles of the non-generating endpoints' items (Turn.Messages).
const (
	RoleInput    = "input"    // embeddings: one input of the batch
	RoleQuery    = "query"    // rerank, score: the query (text_1)
	RoleDocument = "document" // rerank, score: one document (text_2)
)

// Keys of the Parquet file-level key-value metadata.
const (
	MetaFormat        = "tracekit.format"         // FormatTrace or FormatRecording
	MetaSchemaVersion = "tracekit.schema_version" // decimal integer
	MetaTrace         = "tracekit.trace_meta"     // JSON of TraceMeta
	MetaRun           = "tracekit.run_meta"       // JSON of RunMeta
)

// Message is one chat message. Tokens is its token count under the trace's
// tokenizer; when Content is empty (content redacted by capture) replay
// synthesizes text of that many tokens.
type Message struct {
	Role    string `parquet:"role" json:"role"`
	Content string `parquet:"content" json:"content"`
	Tokens  int32  `parquet:"tokens" json:"tokens"`
	// ToolCalls are an assistant message's OpenAI tool calls (sent as
	// "tool_calls"); empty for other messages.
	ToolCalls []ToolCall `parquet:"tool_calls,list" json:"tool_calls,omitempty"`
	// ToolCallID names the call a "tool" message answers (sent as
	// "tool_call_id"); empty for other roles.
	ToolCallID string `parquet:"tool_call_id" json:"tool_call_id,omitempty"`

	// Virtual marks a message whose text the trace does not hold (an
	// import with lengths and hash blocks only): Content is empty and
	// replay makes the text before the request is due, with the trace's
	// prompt generator (TraceMeta.Prompts), as exactly Tokens tokens made
	// of the blocks Turn.PrefixHashes[BlockStart:] and, past them, filler
	// blocks salted by BlockSeed: the text the import would have stored.
	Virtual bool `parquet:"virtual" json:"virtual,omitempty"`
	// BlockStart is the index in the turn's PrefixHashes of the first
	// block of a virtual message.
	BlockStart int32 `parquet:"block_start" json:"block_start,omitempty"`
	// BlockSeed salts the filler blocks of a virtual message (blocks the
	// source gave no hash for).
	BlockSeed int64 `parquet:"block_seed" json:"block_seed,omitempty"`

	// Media are the images, videos and audio clips the message carries
	// after its text, in order (a user message's; replay sends each in its
	// API's content part). Empty in traces before schema version 5.
	Media []Media `parquet:"media,list" json:"media,omitempty"`
}

// The kinds of Media.
const (
	MediaImage = "image"
	MediaVideo = "video"
	MediaAudio = "audio"
)

// Media is one image, video or audio item of a message: its kind, format
// and shape. A virtual item (Hash empty) holds no bytes: replay makes them
// from Seed and the shape (internal/media), deterministically, before the
// request is due, so a trace of many large images stays small. A real item
// (a dataset's file, a captured request) is named by Hash and its bytes
// are stored once in the trace's media file (MediaFileSuffix).
type Media struct {
	Kind   string `parquet:"kind" json:"kind"`     // MediaImage, MediaVideo or MediaAudio
	Format string `parquet:"format" json:"format"` // image: png or jpeg; video: mp4; audio: wav
	// Width and Height are an image's or a video frame's size in pixels.
	Width  int32 `parquet:"width" json:"width,omitempty"`
	Height int32 `parquet:"height" json:"height,omitempty"`
	// Frames is a video's frame count; DurationMs an audio clip's (or a
	// video's) length in milliseconds.
	Frames     int32 `parquet:"frames" json:"frames,omitempty"`
	DurationMs int32 `parquet:"duration_ms" json:"duration_ms,omitempty"`
	// Seed makes a virtual item's bytes.
	Seed int64 `parquet:"seed" json:"seed,omitempty"`
	// Hash is the lower-case hex SHA-256 of a real item's bytes; "" for a
	// virtual one.
	Hash string `parquet:"hash" json:"hash,omitempty"`
	// Bytes is the encoded size when known (a real item's), else 0.
	Bytes int64 `parquet:"bytes" json:"bytes,omitempty"`

	// Data holds the item's bytes once a reader has made or loaded them
	// for sending (replay, before the request is due); never stored. A
	// string, so that Media stays comparable (a key of a map of items).
	Data string `parquet:"-" json:"-"`
	// URL, when set by a reader, is where the receiver fetches the bytes
	// instead of from the request (replay --media-url-base); never stored.
	URL string `parquet:"-" json:"-"`
	// Base64, when a reader set it, is Data in standard base64, encoded
	// ahead of the request (replay's look-ahead) so that building a body
	// of megabytes copies it rather than encodes it; never stored.
	Base64 string `parquet:"-" json:"-"`
}

// MediaFileSuffix names the file beside a trace that holds its real media
// items' bytes, one row per distinct hash: trace.parquet has
// trace.parquet.media.
const MediaFileSuffix = ".media"

// ToolCall is one OpenAI function tool call of an assistant message.
// Arguments is the JSON text of the arguments, as the API carries it.
type ToolCall struct {
	ID        string `parquet:"id" json:"id"`
	Name      string `parquet:"name" json:"name"`
	Arguments string `parquet:"arguments" json:"arguments"`
}

// RootParent in Turn.Parents names the conversation's start instead of an
// earlier turn: a turn whose Parents is {RootParent} starts a branch of its
// own, ThinkTimeNs after the conversation started.
const RootParent int32 = -1

// Turn is one row of a trace: one request of one conversation.
//
// Timing: a conversation starts StartOffsetNs after the run start. In
// closed-loop replay (the default) turn k>0 is sent ThinkTimeNs after the
// response to turn k-1 ended. In open-loop replay (--timing trace) every turn
// is sent at ArrivalOffsetNs, which for turn 0 equals StartOffsetNs.
//
// Rows are sorted by (StartOffsetNs, ConversationID, Turn), so a reader meets
// conversations in start order with their turns contiguous.
type Turn struct {
	ConversationID  string `parquet:"conversation_id" json:"conversation_id"`
	Turn            int32  `parquet:"turn" json:"turn"` // 0-based request index within the conversation
	StartOffsetNs   int64  `parquet:"start_offset_ns" json:"start_offset_ns"`
	ArrivalOffsetNs int64  `parquet:"arrival_offset_ns" json:"arrival_offset_ns"`
	ThinkTimeNs     int64  `parquet:"think_time_ns" json:"think_time_ns"`
	// Messages are the new messages of this turn: the system prompt (turn 0
	// only) and the user message. History is carried by replay.
	Messages []Message `parquet:"messages,list" json:"messages"`
	// ReferenceAnswer is the source's assistant answer, empty when it has none.
	ReferenceAnswer string `parquet:"reference_answer" json:"reference_answer,omitempty"`
	// InputTokens counts the tokens of Messages (not of the history).
	InputTokens int32 `parquet:"input_tokens" json:"input_tokens"`
	// OutputTokens is the target output length, sent as max_tokens.
	OutputTokens int32 `parquet:"output_tokens" json:"output_tokens"`
	// PrefixHashes describe prefix reuse in imported traces: block i of the
	// full prompt (history + Messages) hashes to PrefixHashes[i]; two requests
	// sharing a hash prefix share that token prefix. Empty when unknown.
	PrefixHashes []int64 `parquet:"prefix_hashes,list" json:"prefix_hashes,omitempty"`
	// Model overrides replay's --model for this request when non-empty.
	Model string `parquet:"model" json:"model,omitempty"`
	// NonStreaming marks a request the source sent with "stream": false;
	// replay sends it so. Traces written before this column read as false:
	// streaming, which is what they held.
	NonStreaming bool `parquet:"non_streaming" json:"non_streaming,omitempty"`

	// Parents make a conversation a dependency graph (agentic traffic).
	// Empty: the previous turn (turn k waits for turn k-1, a chat; turn 0
	// for nothing), which is what every version 1 trace means. Otherwise
	// the turns of this conversation (indices below Turn, or RootParent)
	// this request waits for: it is sent ThinkTimeNs after the last of them
	// finished, and its history is their transcripts (each parent's history,
	// messages and answer) merged in the order listed, a prefix of messages
	// they share taken once.
	Parents []int32 `parquet:"parents,list" json:"parents,omitempty"`
	// After are wait-only dependencies: turns of this conversation
	// (indices below Turn) this request also waits for without taking
	// their transcripts into its history (an agent that rewrote its context
	// around an earlier answer still waited for it). In closed loop the
	// request is sent ThinkTimeNs after the later of its parents and these
	// turns finished; a failed After turn does not stop it (its history
	// does not hold the failed answer: an agent framework hands the
	// waiting step the error and goes on). Open loop ignores it, as it
	// ignores Parents' timing. Empty in traces before schema version 3.
	After []int32 `parquet:"after,list" json:"after,omitempty"`
	// Tools is the request's OpenAI "tools" array as JSON text, "" when it
	// has none; ToolChoice its "tool_choice" as JSON text ("\"auto\"",
	// "\"required\"" or an object), "" when unset.
	Tools      string `parquet:"tools" json:"tools,omitempty"`
	ToolChoice string `parquet:"tool_choice" json:"tool_choice,omitempty"`
	// ReferenceToolCalls are the tool calls of the source's assistant
	// answer (ReferenceAnswer holds its text): what a later turn's history
	// carries with --history reference, and what a live answer is compared
	// with.
	ReferenceToolCalls []ToolCall `parquet:"reference_tool_calls,list" json:"reference_tool_calls,omitempty"`
	// Endpoint is the API the request is sent on (one of Endpoints), or ""
	// for replay's --endpoint (chat or completions): what every trace before
	// schema version 4 means. The generating APIs carry a conversation in
	// Messages as chat does. Embeddings carry one Message of role RoleInput
	// per input of the batch; rerank and score one RoleQuery message and a
	// RoleDocument message per document, each with its Tokens (and Virtual
	// text like any message).
	Endpoint string `parquet:"endpoint" json:"endpoint,omitempty"`
	// ReasoningTokens are the reasoning (thinking) tokens the answer starts
	// with, within OutputTokens; 0 when none or unknown. replay's
	// --mock-hints asks tracekit mock for exactly this many.
	ReasoningTokens int32 `parquet:"reasoning_tokens" json:"reasoning_tokens,omitempty"`
}

// schemaVersion is the oldest trace schema version that holds t: what an
// older reader would lose decides.
func (t *Turn) schemaVersion() int {
	for i := range t.Messages {
		if len(t.Messages[i].Media) > 0 {
			return TraceSchemaVersion
		}
	}
	switch {
	case t.ReasoningTokens > 0 ||
		t.Endpoint != "" && t.Endpoint != EndpointChat && t.Endpoint != EndpointCompletions:
		return traceVersionEndpoint
	case len(t.After) > 0:
		return traceVersionAfter
	}
	return traceVersionBase
}

// TraceMeta is the file-level description of a trace.
type TraceMeta struct {
	TracekitVersion string            `json:"tracekit_version"`
	Command         string            `json:"command"` // the generating command line
	Seed            int64             `json:"seed"`
	Tokenizer       string            `json:"tokenizer"`
	Source          string            `json:"source"`     // synthetic, sharegpt, mooncake, capture, ...
	CreatedAt       string            `json:"created_at"` // RFC 3339, UTC
	Options         map[string]string `json:"options,omitempty"`
	// Prompts is the generator of the trace's virtual messages
	// (Message.Virtual); nil when every message holds its text.
	Prompts *PromptGenerator `json:"prompts,omitempty"`
}

// PromptGeneratorBlocks is PromptGenerator.Name of internal/blocktext's
// Blocks over the default corpus.
const PromptGeneratorBlocks = "blocktext.default"

// PromptGenerator says how the text of virtual messages is made: Name
// (PromptGeneratorBlocks: Blocks over the embedded default prose) cut
// under Tokenizer (an embedded tokenizer's name) in blocks of BlockSize
// tokens. A reader that does not know Name cannot make the text and must
// refuse the trace rather than send other text.
type PromptGenerator struct {
	Name      string `json:"name"`
	Tokenizer string `json:"tokenizer"`
	BlockSize int    `json:"block_size"`
}

// ErrorKind names what failed in a Record; ErrNone (the empty string)
// means success. The values are the strings the error_kind column holds.
type ErrorKind string

// Error kinds of a Record.
const (
	ErrNone            ErrorKind = ""
	ErrTimeout         ErrorKind = "timeout"          // --request-timeout elapsed
	ErrIdleTimeout     ErrorKind = "idle_timeout"     // no event within --idle-timeout
	ErrConnect         ErrorKind = "connect"          // dial, TLS or write failure before a response
	ErrHTTPStatus      ErrorKind = "http_status"      // non-2xx status
	ErrStreamTruncated ErrorKind = "stream_truncated" // connection ended before [DONE]
	ErrMalformed       ErrorKind = "malformed"        // an event that is not valid JSON, or an error object mid-stream
	ErrCanceled        ErrorKind = "canceled"         // the run ended (signal, --benchmark-timeout) while in flight
	// ErrCanceledByClient: replay closed the request on purpose
	// (--cancel-rate), as a user who gives up does; not the server's
	// failure, and counted apart from errors.
	ErrCanceledByClient ErrorKind = "canceled_by_client"
	ErrHeadersTimeout   ErrorKind = "headers_timeout" // no response headers within --idle-timeout of the send
	ErrNotStreaming     ErrorKind = "not_streaming"   // a stream was asked for and the server answered one JSON body
	// ErrParentFailed: a graph node not sent because a parent it waits for
	// failed (or was never sent); its message names the parent's request
	// id and error kind. Nothing went over the network.
	ErrParentFailed ErrorKind = "parent_failed"
)

// Record is one row of a recording: one request attempt.
//
// Every time is nanoseconds of the monotonic clock from the run start
// (RunMeta.StartMonoNs): every int64 field and int64 list whose Go name
// ends in "Ns" (Shift moves them all; one tagged unset:"0" keeps 0 for
// "none"). Their columns are named *_ns, but for the event times, kept to
// the microsecond on disk (event_gap_us).
// The event lists are parallel: EventNs[i] is when the
// network read that completed event i returned (stamped before parsing, so
// all events completed by one read share a stamp), EventTokens[i] the tokens
// it carried. Only events whose "choices" is non-empty are listed (a
// role-only first chunk is listed with 0 tokens; the usage-only chunk and
// [DONE] are not), which is exactly what vLLM's TTFT/ITL definitions consume.
type Record struct {
	RequestID      string `parquet:"request_id" json:"request_id"`
	ConversationID string `parquet:"conversation_id" json:"conversation_id"`
	Turn           int32  `parquet:"turn" json:"turn"`
	Shard          int32  `parquet:"shard" json:"shard"`
	Attempt        int32  `parquet:"attempt" json:"attempt"`
	Warmup         bool   `parquet:"warmup" json:"warmup"`
	Target         string `parquet:"target" json:"target"` // base URL the request went to

	IntendedNs int64 `parquet:"intended_ns" json:"intended_ns"`         // when the schedule wanted it sent
	SlotNs     int64 `parquet:"slot_ns" json:"slot_ns"`                 // when it got a concurrency slot, before its body was built (queue time = SlotNs - IntendedNs); the closest stamp to vLLM's st
	SentNs     int64 `parquet:"sent_ns" json:"sent_ns"`                 // when the write of its bytes completed (body built, connection set up): after vLLM's st
	HeadersNs  int64 `parquet:"headers_ns" json:"headers_ns" unset:"0"` // response headers read; 0 if none
	DoneNs     int64 `parquet:"done_ns" json:"done_ns"`                 // stream ended, failed or was canceled

	Status       int32     `parquet:"status" json:"status"` // HTTP status, 0 if none
	ErrorKind    ErrorKind `parquet:"error_kind" json:"error_kind"`
	ErrorMessage string    `parquet:"error_message" json:"error_message"`

	InputTokens      int32 `parquet:"input_tokens" json:"input_tokens"`           // prompt tokens by the trace's tokenizer (history included)
	MaxTokens        int32 `parquet:"max_tokens" json:"max_tokens"`               // max_tokens sent
	PromptTokens     int32 `parquet:"prompt_tokens" json:"prompt_tokens"`         // usage.prompt_tokens, -1 if not reported
	CompletionTokens int32 `parquet:"completion_tokens" json:"completion_tokens"` // usage.completion_tokens, -1 if not reported
	CachedTokens     int32 `parquet:"cached_tokens" json:"cached_tokens"`         // usage.prompt_tokens_details.cached_tokens, -1 if not reported
	// TokensExact is true when EventTokens came from the server's
	// continuous usage stats, false when counted from the text.
	TokensExact bool `parquet:"tokens_exact" json:"tokens_exact"`

	// EventNs holds run-relative times in nanoseconds in memory, as every
	// other ...Ns field. On disk (column event_gap_us) they are kept to the
	// microsecond: with o_i = RoundUs(EventNs[i] - SentNs), element 0 is
	// o_0 and element i is o_i - o_{i-1}, and a reader gives back
	// EventNs[i] = SentNs + 1000*o_i, within 500 ns of the time written
	// (RoundEvents gives the same times in memory). The elements are
	// doubles holding whole numbers (gaps.go says why); the tag names the
	// column, and RecordWriter and the readers convert. Recordings of
	// schema 7 hold the same gaps as int64, of schema 6 nanosecond gaps in
	// event_gap_ns, older ones the times as they are in event_ns.
	EventNs     []int64 `parquet:"event_gap_us,list" json:"event_ns"`
	EventTokens []int32 `parquet:"event_tokens,list" parquet-element:",delta" json:"event_tokens"`

	// NonStreaming marks a request sent with "stream": false: its one
	// "event" is the whole body, so it has an end-to-end latency but no
	// TTFT or inter-token gaps. Recordings written before this column read
	// as false.
	NonStreaming bool `parquet:"non_streaming" json:"non_streaming,omitempty"`

	// Parents are the trace turn's graph parents (Turn.Parents) as sent:
	// empty for a chat turn (it waits for the previous turn), RootParent
	// for a branch that starts at the conversation start. analyze builds
	// the session graph from them without the trace. Recordings before
	// schema version 2 read as empty.
	Parents []int32 `parquet:"parents,list" parquet-element:",delta" json:"parents,omitempty"`
	// After are the trace turn's wait-only dependencies (Turn.After) as
	// sent. Recordings before schema version 3 read as empty.
	After []int32 `parquet:"after,list" parquet-element:",delta" json:"after,omitempty"`
	// ToolCalls counts the tool calls of the live answer (0 without).
	ToolCalls int32 `parquet:"tool_calls" json:"tool_calls,omitempty"`
	// ToolCallMismatch is true when the live answer's tool calls differed
	// from the trace's ReferenceToolCalls in count or names; replay then
	// carried the recorded assistant message into the descendants.
	ToolCallMismatch bool `parquet:"tool_call_mismatch" json:"tool_call_mismatch,omitempty"`

	// Endpoint is the API the request was sent on (one of Endpoints).
	// Recordings before schema version 4 read "": chat or completions, as
	// the run's metadata says.
	Endpoint string `parquet:"endpoint" json:"endpoint,omitempty"`
	// ReasoningTokens is the usage's reasoning (thinking) token count
	// (completion_tokens_details.reasoning_tokens, Responses'
	// output_tokens_details.reasoning_tokens), -1 if not reported. It is part
	// of CompletionTokens. Recordings before version 4 read 0.
	ReasoningTokens int32 `parquet:"reasoning_tokens" json:"reasoning_tokens,omitempty"`
	// FirstAnswerEvent is the index in EventNs of the first event that
	// carried answer text or a tool call rather than reasoning: the time to
	// the first answer token is EventNs[FirstAnswerEvent]. len(EventNs)
	// when no event did (a stream of reasoning only). Recordings before
	// version 4 read 0: every event counted as answer.
	FirstAnswerEvent int32 `parquet:"first_answer_event" json:"first_answer_event,omitempty"`
	// Items counts what a non-generating endpoint answered: embeddings
	// returned, rerank or score results. 0 for the generating APIs.
	Items int32 `parquet:"items" json:"items,omitempty"`

	// What a request with media sent (0 for one without; recordings before
	// version 5 read 0): WriteStartNs is when the write of its bytes began
	// (SentNs when it ended, so the send took SentNs - WriteStartNs),
	// RequestBytes the body's size, MediaItems and MediaBytes its media
	// items and their encoded bytes (before base64).
	WriteStartNs int64 `parquet:"write_start_ns" json:"write_start_ns,omitempty" unset:"0"`
	RequestBytes int64 `parquet:"request_bytes" json:"request_bytes,omitempty"`
	MediaItems   int32 `parquet:"media_items" json:"media_items,omitempty"`
	MediaBytes   int64 `parquet:"media_bytes" json:"media_bytes,omitempty"`
	// The same by kind (MediaImage, MediaVideo, MediaAudio): items and
	// encoded bytes, summing to MediaItems and MediaBytes. Recordings
	// written before these columns read 0: the kinds are unknown there.
	ImageItems int32 `parquet:"image_items" json:"image_items,omitempty"`
	ImageBytes int64 `parquet:"image_bytes" json:"image_bytes,omitempty"`
	VideoItems int32 `parquet:"video_items" json:"video_items,omitempty"`
	VideoBytes int64 `parquet:"video_bytes" json:"video_bytes,omitempty"`
	AudioItems int32 `parquet:"audio_items" json:"audio_items,omitempty"`
	AudioBytes int64 `parquet:"audio_bytes" json:"audio_bytes,omitempty"`
	// AudioMs is the audio clips' length in milliseconds, as the trace's
	// items give it (Media.DurationMs); 0 in recordings written before
	// this column, whose clips were the 16 kHz 16-bit mono WAV that
	// internal/media makes (their bytes give their length).
	AudioMs int64 `parquet:"audio_ms" json:"audio_ms,omitempty"`
	// The prompt tokens the media took, by kind, as the server's usage
	// split them (vLLM's prompt_tokens_details.multimodal_tokens, OpenAI's
	// prompt_tokens_details.audio_tokens); 0 when it did not report them,
	// which is the most a server does: nothing is estimated here.
	ImageTokens int32 `parquet:"image_tokens" json:"image_tokens,omitempty"`
	VideoTokens int32 `parquet:"video_tokens" json:"video_tokens,omitempty"`
	AudioTokens int32 `parquet:"audio_tokens" json:"audio_tokens,omitempty"`
	// Model is the model the request named when its trace turn chose one
	// (a model mix, an import that kept it); "" when it named the run's
	// (RunMeta.Load.Model). Recordings before version 5 read "".
	Model string `parquet:"model" json:"model,omitempty"`
}

// schemaVersion is the oldest recording schema version that holds r.
// Version 4 is needed for an API beyond chat and completions, reasoning,
// or items; a first answer event after events without tokens (chat's
// role-only first chunk) is not reasoning: such a chat recording stays
// readable by a version-3 reader. Any event needs version 8: a version-7
// reader expects integers in event_gap_us, and an older one would find
// no event column it knows (event_ns, event_gap_ns) and read no events,
// so it must refuse the file.
func (r *Record) schemaVersion() int {
	if len(r.EventNs) > 0 {
		return RecordingSchemaVersion
	}
	if r.MediaItems > 0 || r.Model != "" {
		return recordingVersionMedia
	}
	if (r.Endpoint != "" && r.Endpoint != EndpointChat && r.Endpoint != EndpointCompletions) ||
		r.ReasoningTokens > 0 || r.Items > 0 {
		return recordingVersionAPIs
	}
	for i := 0; i < int(r.FirstAnswerEvent) && i < len(r.EventTokens); i++ {
		if r.EventTokens[i] > 0 {
			return recordingVersionAPIs
		}
	}
	if len(r.After) > 0 {
		return recordingVersionAfter
	}
	return recordingVersionBase
}

// RunMeta is the file-level description of a recording. Health is filled
// when the run ends.
type RunMeta struct {
	TracekitVersion string   `json:"tracekit_version"`
	StartWallNs     int64    `json:"start_wall_ns"` // run start, unix ns
	StartMonoNs     int64    `json:"start_mono_ns"` // run start, CLOCK_MONOTONIC ns
	Targets         []string `json:"targets"`
	Host            string   `json:"host"`
	Command         string   `json:"command"` // secrets removed
	// Config is the full replay configuration, secrets removed.
	Config map[string]any `json:"config,omitempty"`
	Trace  *TraceMeta     `json:"trace,omitempty"` // meta of the trace replayed
	Health *Health        `json:"health,omitempty"`
	// Usage is what replay's pre-run probe found out about continuous usage
	// stats (exact tokens per event); nil in recordings without a probe.
	Usage *UsageProbe `json:"usage_probe,omitempty"`
	// Load is the load configuration analyze reports, typed; recordings
	// written before it have only Config: read it with LoadSettings.
	Load *RunLoad `json:"load,omitempty"`
	// RunID names the run a recording belongs to; every shard of one
	// distributed run carries the same (see RunShard). Empty in older
	// recordings.
	RunID string `json:"run_id,omitempty"`
	// Shard is this recording's place among the run's shards; nil when the
	// run was not sharded or predates the field.
	Shard *RunShard `json:"shard,omitempty"`
	// Clock is how the run's clock was started and the host clock's sync
	// state then (runsync.go); nil in older recordings.
	Clock *RunClock `json:"clock,omitempty"`
	// Metrics is the base name of the run's telemetry sidecar (same directory), "" when not scraped.
	Metrics string `json:"metrics,omitempty"`
	// Stamps is how the run stamped its events' arrival times; nil in
	// recordings that predate it (they used goroutine stamps).
	Stamps *RunStamps `json:"stamps,omitempty"`
}

// Stamp modes of RunStamps.Mode.
const (
	// StampGoroutine: the clock read when the read goroutine got the
	// bytes (after the kernel delivered them and the goroutine ran).
	StampGoroutine = "goroutine"
	// StampKernel: the kernel's software receive time of the last TCP
	// segment of the read that completed the event (SO_TIMESTAMPING).
	StampKernel = "kernel"
	// StampKernelOffset: as StampKernel, but each read ends at an event's
	// end (the queued bytes are peeked and read up to the end of the first
	// event in them), so every event gets the receive time of the segment
	// that carried its last byte, even when several arrived before the
	// reader ran.
	StampKernelOffset = "kernel-offset"
)

// Kernel-offset's arrival observers (RunStamps.Observer).
const (
	ObserverTap     = "packet tap"
	ObserverProcess = "process"
)

// RunStamps is how a run stamped arrivals: the mode it asked for and the
// one it used, and for kernel modes the conversion of the kernel's
// CLOCK_REALTIME stamps to the run's monotonic clock:
//
//	mono = realtime stamp - RealMinusMonoNs
//
// where RealMinusMonoNs is the narrowest of several bracketing (monotonic,
// realtime, monotonic) reads, re-measured every RemeasureNs while the run
// reads; OffsetDriftNs is the largest change a re-measure found (a step of
// the wall clock shows here).
type RunStamps struct {
	Requested string `json:"requested,omitempty"` // the mode asked for ("" default)
	Mode      string `json:"mode"`                // the mode used: StampGoroutine, StampKernel or StampKernelOffset
	// Note says why Mode is not Requested, or what applies where (TLS
	// connections: kernel stamps of the TCP reads under TLS, no byte
	// offsets). Empty when the mode applied everywhere.
	Note string `json:"note,omitempty"`

	RealMinusMonoNs int64 `json:"real_minus_mono_ns,omitempty"`
	OffsetWidthNs   int64 `json:"offset_width_ns,omitempty"` // bracket of the offset's measure: its error bound
	RemeasureNs     int64 `json:"remeasure_ns,omitempty"`
	Remeasures      int64 `json:"remeasures,omitempty"`
	OffsetDriftNs   int64 `json:"offset_drift_ns,omitempty"`

	// KernelReads counts reads stamped by the kernel, FallbackReads reads
	// that carried no kernel stamp and were stamped by the clock instead,
	// SplitReads the reads kernel-offset cut at an event's end with more
	// bytes queued behind it (events that would have shared a stamp),
	// ObservedReads the reads whose stamp came from the arrival observer
	// (earlier than the kernel stamp of the read).
	KernelReads   int64 `json:"kernel_reads,omitempty"`
	FallbackReads int64 `json:"fallback_reads,omitempty"`
	SplitReads    int64 `json:"split_reads,omitempty"`
	ObservedReads int64 `json:"observed_reads,omitempty"`
	// RingReads counts the reads made in batches, many sockets' with one
	// system call (io_uring); the others were a recvmsg each.
	RingReads int64 `json:"ring_reads,omitempty"`
	// Observer is what observed arrivals in kernel-offset mode:
	// ObserverTap (a packet socket's ring in the client: every segment's
	// own receive stamp) or ObserverProcess (a child process that peeks at
	// each arrival); empty without one.
	Observer string `json:"observer,omitempty"`
	// TapDrops counts the segments the packet tap's ring dropped because
	// it was full: their bytes got kernel stamps.
	TapDrops int64 `json:"tap_drops,omitempty"`
	// ObserverPriority is the scheduling the kernel-offset arrival
	// observer process got (SCHED_FIFO, a nice value, or normal).
	ObserverPriority string `json:"observer_priority,omitempty"`
	// ObserverOffNs, when not 0, is how long after the run's stamps began
	// kernel-offset switched its observer off because it could not keep up
	// (busy nearly all the time; the note says how busy): reads after it
	// have kernel stamps.
	ObserverOffNs int64 `json:"observer_off_ns,omitempty"`
}

// UsageProbe is the finding of replay's pre-run probe request: whether the
// run asked for vLLM's continuous_usage_stats and why. A record's
// TokensExact still says whether its own events carried usage.
type UsageProbe struct {
	Mode      string `json:"mode"`      // --continuous-usage: auto, on or off
	Requested bool   `json:"requested"` // the run's requests asked for continuous_usage_stats
	Verified  bool   `json:"verified"`  // the probe's streamed events carried cumulative usage
	Reason    string `json:"reason"`    // what the probe saw, in words
}

// RunLoad is what a run was configured to do, as vLLM's result reports
// it. Zero values mean not set.
type RunLoad struct {
	Model          string  `json:"model,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"` // requests in flight at most
	RequestRate    float64 `json:"request_rate,omitempty"`    // requests/s of an open-loop schedule
	Burstiness     float64 `json:"burstiness,omitempty"`      // gamma shape of its gaps
}

// Health is the client's view of itself during a run: if these figures are
// bad, the recorded latencies include client delay.
type Health struct {
	DispatchLagP50Ns int64 `json:"dispatch_lag_p50_ns"`
	DispatchLagP99Ns int64 `json:"dispatch_lag_p99_ns"`
	DispatchLagMaxNs int64 `json:"dispatch_lag_max_ns"`
	SchedLatP99Ns    int64 `json:"sched_latency_p99_ns"` // Go scheduler latency (runtime/metrics)
	// CPUSeconds is the client's CPU time over the run, its arrival
	// observer's (ObserverCPUSeconds) included.
	CPUSeconds  float64 `json:"cpu_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	MaxRSSBytes int64   `json:"max_rss_bytes"`
	// ObserverCPUSeconds is the part of CPUSeconds the arrival observer
	// process used (kernel-offset stamps); 0 without one, and in recordings
	// written before it (whose CPUSeconds did not hold it).
	ObserverCPUSeconds float64 `json:"observer_cpu_seconds,omitempty"`
	// Warnings are Assess's verdicts as the recorder stored them.
	Warnings []string `json:"warnings,omitempty"`
	// Cores is the client's GOMAXPROCS, for the CPU-bound verdict; 0 in
	// recordings written before it.
	Cores int `json:"cores,omitempty"`
}
