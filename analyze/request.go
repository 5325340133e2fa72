package analyze

import (
	"github.com/tracekit/tracekit/trace"
)

// ErrNoEvents is the error kind given to a request that ended without
// error but never streamed an event with choices; vLLM counts it as failed
// ("Never received a valid chunk to calculate TTFT").
const ErrNoEvents = "no_events"

// Request is one request's derived metrics. Times are nanoseconds from the
// (aligned) run start; durations are nanoseconds. Metrics that need events
// are 0 when the request has none.
type Request struct {
	RequestID      string
	ConversationID string
	Turn           int32
	Shard          int32
	Attempt        int32
	Warmup         bool
	Target         string
	File           int // index into Summary.Files

	// Success is vLLM's: no error, a 2xx status and at least one event.
	Success   bool
	Status    int32
	ErrorKind string // "" on success; ErrNoEvents or http_status when the record had none

	// NonStreaming marks a request sent with "stream": false: its one event
	// is the whole body, so it has E2EL and output tokens but no TTFT, ITL
	// or TPOT (all 0 here, and left out of those distributions).
	NonStreaming bool

	IntendedNs, SlotNs, SentNs, DoneNs int64
	FirstNs, LastNs                    int64 // first and last event; 0 without events
	Events                             int32

	// PromptTokens is usage.prompt_tokens, else the trace's input_tokens.
	PromptTokens int32
	// OutputTokens is usage.completion_tokens, else the sum of event tokens
	// (vLLM falls back when the usage figure is missing or 0).
	OutputTokens int32
	CachedTokens int32 // -1 when not reported

	TTFTNs int64   // FirstNs - SentNs
	E2ELNs int64   // LastNs - SentNs
	TPOTNs float64 // (E2EL - TTFT) / (OutputTokens - 1); 0 when OutputTokens <= 1
	// ITLMeanNs is guidellm's request ITL: (LastNs - FirstNs) /
	// (OutputTokens - 1); 0 when OutputTokens <= 1.
	ITLMeanNs float64

	QueueNs         int64 // SlotNs - IntendedNs: waiting for a concurrency slot
	SendDelayNs     int64 // SentNs - SlotNs: the client's own delay in sending (body building, connection set-up, write)
	CorrectedTTFTNs int64 // FirstNs - IntendedNs (coordinated omission corrected)
	CorrectedE2ELNs int64 // LastNs - IntendedNs

	evOff int // index of its first event in accumulator.eventTimes
}

// Derive computes the metrics of one record. Its times must already be
// aligned; file is recorded as Request.File.
func Derive(r *trace.Record, file int) Request {
	q := Request{
		RequestID: r.RequestID, ConversationID: r.ConversationID, Turn: r.Turn,
		Shard: r.Shard, Attempt: r.Attempt, Warmup: r.Warmup, Target: r.Target, File: file,
		Status: r.Status, ErrorKind: r.ErrorKind, NonStreaming: r.NonStreaming,
		IntendedNs: r.IntendedNs, SlotNs: r.SlotNs, SentNs: r.SentNs, DoneNs: r.DoneNs,
		Events:       int32(len(r.EventNs)),
		PromptTokens: r.PromptTokens,
		OutputTokens: r.CompletionTokens,
		CachedTokens: r.CachedTokens,
		QueueNs:      r.SlotNs - r.IntendedNs,
		SendDelayNs:  r.SentNs - r.SlotNs,
	}
	if q.PromptTokens < 0 {
		q.PromptTokens = r.InputTokens
	}
	if q.OutputTokens <= 0 {
		var s int32
		for _, t := range r.EventTokens {
			s += t
		}
		q.OutputTokens = s
	}
	if n := len(r.EventNs); n > 0 {
		q.FirstNs, q.LastNs = r.EventNs[0], r.EventNs[n-1]
		q.TTFTNs = q.FirstNs - q.SentNs
		q.E2ELNs = q.LastNs - q.SentNs
		q.CorrectedTTFTNs = q.FirstNs - q.IntendedNs
		q.CorrectedE2ELNs = q.LastNs - q.IntendedNs
		if r.NonStreaming {
			q.TTFTNs, q.CorrectedTTFTNs = 0, 0
		} else if q.OutputTokens > 1 {
			q.TPOTNs = float64(q.E2ELNs-q.TTFTNs) / float64(q.OutputTokens-1)
			q.ITLMeanNs = float64(q.LastNs-q.FirstNs) / float64(q.OutputTokens-1)
		}
	}
	ok2xx := r.Status >= 200 && r.Status < 300
	switch {
	case q.ErrorKind != "":
	case !ok2xx:
		q.ErrorKind = trace.ErrHTTPStatus
	case len(r.EventNs) == 0:
		q.ErrorKind = ErrNoEvents
	default:
		q.Success = true
	}
	return q
}

// endNs is when the request stopped occupying the client: DoneNs, or its
// last known time if DoneNs is missing.
func (q *Request) endNs() int64 {
	return max(q.DoneNs, q.LastNs, q.SentNs)
}
