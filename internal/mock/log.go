package mock

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tracekit/tracekit/trace"
)

// Format name and schema version of the ground-truth log, stored under
// trace.MetaFormat and trace.MetaSchemaVersion.
const (
	FormatLog        = "tracekit.mock_log"
	LogSchemaVersion = 4
	// MetaLog is the key of the LogMeta JSON in the file's metadata.
	MetaLog = "tracekit.mock_meta"
)

// Outcomes of a request in the log.
const (
	OutcomeOK         = "ok"          // a complete, well-formed response (a stall or slow headers only delay it)
	OutcomeBadRequest = "bad_request" // rejected with a 4xx
	OutcomeFault      = "fault"       // an injected fault broke the response
	OutcomeClientGone = "client_gone" // the client closed the connection early
	OutcomeCanceled   = "canceled"    // the server was closing
)

// LogEntry is one row of the ground-truth log: one request as the server
// handled it. Every *MonoNs is absolute CLOCK_MONOTONIC nanoseconds
// (clock.Mono), comparable with a recording's RunMeta.StartMonoNs + offsets.
//
// The event lists are parallel and follow trace.Record's definition: only
// events with output (the chat role-only first chunk is listed with 0
// tokens; the usage chunk, [DONE], the events that open or close a
// Responses or Messages stream or its items, an injected malformed or
// error event are not). A Responses or Messages stream's opening events
// go out in the write of its first event. EventMonoNs[i] is taken right after the write and flush
// of event i returned; EventLatenessNs[i] is how much later that was than
// the latency model scheduled it.
type LogEntry struct {
	RequestID string `parquet:"request_id" json:"request_id"`
	// Endpoint is the request's API: chat, completions, responses,
	// messages, embeddings, rerank, score, transcriptions or translations
	// (trace's endpoint names).
	Endpoint      string `parquet:"endpoint" json:"endpoint"`
	Model         string `parquet:"model" json:"model"`
	Stream        bool   `parquet:"stream" json:"stream"`
	ArrivalMonoNs int64  `parquet:"arrival_mono_ns" json:"arrival_mono_ns"` // request headers read
	ArrivalWallNs int64  `parquet:"arrival_wall_ns" json:"arrival_wall_ns"`
	HeadersMonoNs int64  `parquet:"headers_mono_ns" json:"headers_mono_ns"` // response headers flushed; 0 if none
	AdmitMonoNs   int64  `parquet:"admit_mono_ns" json:"admit_mono_ns"`     // got a batch slot; 0 if never
	DoneMonoNs    int64  `parquet:"done_mono_ns" json:"done_mono_ns"`       // entry recorded, before the final bytes
	Status        int32  `parquet:"status" json:"status"`                   // HTTP status, 0 if none was sent
	Outcome       string `parquet:"outcome" json:"outcome"`
	Fault         string `parquet:"fault" json:"fault"` // canonical X-Tracekit-Fault form, empty if none
	Error         string `parquet:"error" json:"error,omitempty"`
	FinishReason  string `parquet:"finish_reason" json:"finish_reason"`
	// ToolCalls is how many tool calls the answer carried (0: text);
	// logs before schema version 2 read 0.
	ToolCalls int32 `parquet:"tool_calls" json:"tool_calls"`

	PromptTokens     int32  `parquet:"prompt_tokens" json:"prompt_tokens"`
	CachedTokens     int32  `parquet:"cached_tokens" json:"cached_tokens"`
	CompletionTokens int32  `parquet:"completion_tokens" json:"completion_tokens"` // planned output length
	MaxTokens        int32  `parquet:"max_tokens" json:"max_tokens"`
	Messages         int32  `parquet:"messages" json:"messages"`           // an embeddings, rerank or score request: its sequences
	MessagesHash     string `parquet:"messages_hash" json:"messages_hash"` // HashMessages
	// ReasoningTokens is how many of CompletionTokens, the first ones, are
	// reasoning. FirstAnswerEvent is the index in the event lists of the
	// first event with answer tokens (text or a tool call): the events
	// with tokens before it are reasoning; len(EventMonoNs) when none went
	// out. Items is what an embeddings, rerank or score answer returned
	// (embeddings, results, scores). Logs before schema version 3 read 0.
	ReasoningTokens  int32 `parquet:"reasoning_tokens" json:"reasoning_tokens"`
	FirstAnswerEvent int32 `parquet:"first_answer_event" json:"first_answer_event"`
	Items            int32 `parquet:"items" json:"items"`
	// MediaItems, MediaTokens and MediaBytes are the request's images,
	// video and audio items, the prompt tokens they took (part of
	// PromptTokens; media.Tokens) and their decoded bytes. Logs before
	// schema version 4 read 0.
	MediaItems  int32 `parquet:"media_items" json:"media_items"`
	MediaTokens int32 `parquet:"media_tokens" json:"media_tokens"`
	MediaBytes  int64 `parquet:"media_bytes" json:"media_bytes"`
	// PlannedTTFTNs is the model's time to first token: queueing + prefill.
	PlannedTTFTNs int64 `parquet:"planned_ttft_ns" json:"planned_ttft_ns"`

	EventMonoNs     []int64 `parquet:"event_mono_ns,list" json:"event_mono_ns"`
	EventTokens     []int32 `parquet:"event_tokens,list" json:"event_tokens"`
	EventLatenessNs []int64 `parquet:"event_lateness_ns,list" json:"event_lateness_ns"`

	// Body is the raw request body, kept in memory only with KeepBodies.
	Body []byte `parquet:"-" json:"-"`
}

// LogMeta is the file-level description of a log.
type LogMeta struct {
	TracekitVersion string `json:"tracekit_version"`
	URL             string `json:"url"`
	StartMonoNs     int64  `json:"start_mono_ns"` // server start, CLOCK_MONOTONIC ns
	StartWallNs     int64  `json:"start_wall_ns"` // server start, unix ns
	Config          Config `json:"config"`
	// Stats is filled when the server closes.
	Stats *Stats `json:"stats,omitempty"`
}

// LogFormat is the ground-truth log's file format (trace's generic
// Parquet helper writes and checks it).
var LogFormat = trace.FileFormat{Name: FormatLog, Version: LogSchemaVersion}

// logWriter owns the Parquet log: one goroutine drains a bounded channel so
// request handlers never touch the file.
type logWriter struct {
	path string
	w    *trace.ParquetWriter[LogEntry]
	in   chan LogEntry
	done chan error
	meta LogMeta
	mu   sync.Mutex // guards meta until close
}

const logQueue = 1024

func newLogWriter(path string, meta LogMeta) (*logWriter, error) {
	w, err := trace.CreateParquet[LogEntry](path, LogFormat)
	if err != nil {
		return nil, fmt.Errorf("creating mock log: %w", err)
	}
	lw := &logWriter{path: path, w: w, in: make(chan LogEntry, logQueue), done: make(chan error, 1), meta: meta}
	go lw.run()
	return lw, nil
}

// run writes rows until in is closed (the writer ends a row group every
// trace.RowGroupRows rows, bounding memory), then finishes the file.
func (lw *logWriter) run() {
	var err error
	for e := range lw.in {
		if err != nil {
			continue // keep draining so handlers never block on a dead writer
		}
		if werr := lw.w.Write(e); werr != nil {
			err = fmt.Errorf("writing mock log: %w", werr)
		}
	}
	lw.done <- errors.Join(err, lw.finish())
}

func (lw *logWriter) finish() error {
	lw.mu.Lock()
	err := lw.w.SetMeta(MetaLog, lw.meta)
	lw.mu.Unlock()
	if err != nil {
		lw.w.Abort()
		return fmt.Errorf("mock log %s: %w", lw.path, err)
	}
	if err := lw.w.Close(); err != nil {
		return fmt.Errorf("mock log: %w", err)
	}
	return nil
}

// close stops accepting rows, writes stats into the metadata and waits for
// the file to be complete.
func (lw *logWriter) close(st Stats) error {
	lw.mu.Lock()
	lw.meta.Stats = &st
	lw.mu.Unlock()
	close(lw.in)
	return <-lw.done
}

// ReadLog reads a whole ground-truth log written by a mock.
func ReadLog(path string) ([]LogEntry, LogMeta, error) {
	var meta LogMeta
	rows, err := trace.ReadParquet[LogEntry](path, LogFormat, MetaLog, &meta)
	if err != nil {
		return nil, meta, fmt.Errorf("reading mock log: %w", err)
	}
	return rows, meta, nil
}
