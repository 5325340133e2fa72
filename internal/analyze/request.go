package analyze

import (
	"slices"
	"strings"

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

	// Success follows Options.Success. vLLM's rule (the default): HTTP 200,
	// at least one event, and the request ended without what vLLM's client
	// sees as an exception, so a stream that ended cleanly without
	// data: [DONE] succeeds. The strict rule also fails that stream.
	Success bool
	// Truncated marks a stream that ended without data: [DONE] (error kind
	// stream_truncated), whatever the rule made of it.
	Truncated bool
	Status    int32
	// ErrorKind is the record's ("" when it had none; ErrNoEvents or
	// http_status when it had none but failed). A truncated stream counted
	// as a success keeps stream_truncated here.
	ErrorKind    string
	ErrorMessage string

	// NonStreaming marks a request sent with "stream": false: its one event
	// is the whole body, so it has E2EL and output tokens but no TTFT, ITL
	// or TPOT (all 0 here, and left out of those distributions). Every
	// request to a non-generating endpoint (embeddings, rerank, score) is
	// one.
	NonStreaming bool

	// Model is the model the request named: the record's, else (resolved
	// before Derive) the run's --model.
	Model string

	// Endpoint is the API the request was sent on (trace.Endpoints); a
	// recording's "" is resolved from the run's metadata (chat or
	// completions) before Derive, which takes a remaining "" as chat.
	Endpoint string
	// ReasoningTokens is the usage's reasoning token count, -1 when not
	// reported (or recorded before the column existed).
	ReasoningTokens int32
	// Items counts the embeddings or rerank/score results of a
	// non-generating request.
	Items int32
	// TTFONs is the time to first output token (AIPerf's TTFO): the first
	// event with answer text or a tool call rather than reasoning
	// (trace.Record.FirstAnswerEvent) minus StartNs; Answered is false,
	// and TTFONs 0, when no event carried one (or the request did not
	// stream).
	TTFONs   int64
	Answered bool
	// TTSTNs is AIPerf's time to second token: the second streamed event
	// minus the first (0 with fewer than two events). ReasoningNs is how
	// long the stream reasoned before answering: the first event to the
	// first answer event (TTFONs - TTFTNs), or to the last event for a
	// stream of reasoning only; 0 when nothing streamed before the answer.
	TTSTNs, ReasoningNs int64
	// Reasoning is the reasoning token count: ReasoningTokens when usage
	// reported it, else (ReasoningCounted) the tokens of the events before
	// the first answer event. Answer = OutputTokens - Reasoning.
	Reasoning, Answer int32
	ReasoningCounted  bool
	// thoughtFirst: an event carrying tokens came before the first answer
	// event (reasoning streamed first, not just a role-only chunk).
	thoughtFirst bool

	IntendedNs, SlotNs, SentNs, DoneNs int64
	// StartNs is the start latencies are measured from (Options.Start):
	// SentNs by default, SlotNs for vLLM's st.
	StartNs         int64
	FirstNs, LastNs int64 // first and last event; 0 without events
	Events          int32

	// PromptTokens is usage.prompt_tokens, else the trace's input_tokens.
	PromptTokens int32
	// OutputTokens is usage.completion_tokens, else the sum of event tokens
	// (vLLM falls back when the usage figure is missing or 0).
	OutputTokens int32
	CachedTokens int32 // -1 when not reported

	TTFTNs int64   // FirstNs - StartNs
	E2ELNs int64   // LastNs - StartNs
	TPOTNs float64 // (E2EL - TTFT) / (OutputTokens - 1); 0 when OutputTokens <= 1
	// ITLMeanNs is AIPerf's request ITL: (LastNs - FirstNs) /
	// (OutputTokens - 1); ITLContentNs guidellm's, from the first to the last
	// event with content tokens. 0 when OutputTokens <= 1.
	ITLMeanNs, ITLContentNs float64

	QueueNs         int64 // SlotNs - IntendedNs: waiting for a concurrency slot
	SendDelayNs     int64 // SentNs - SlotNs: the client's own delay in sending (body building, connection set-up, write)
	CorrectedTTFTNs int64 // FirstNs - IntendedNs (coordinated omission corrected)
	CorrectedE2ELNs int64 // LastNs - IntendedNs

	// The inputs of vLLM multi-turn's statistics (its client's view): the
	// first event carrying content tokens and its tokens, the events that
	// carried content, the tokens of all events (the client's count, unless
	// tokens_exact) and the trace's count of the prompt (history included).
	// MultiTurnValid is that client's success: HTTP 200, no transport
	// error, and (streaming) a content chunk.
	FirstContentNs     int64
	LastContentNs      int64
	FirstContentTokens int32
	ContentEvents      int32
	ClientOutputTokens int32
	InputTokens        int32
	MultiTurnValid     bool

	// The graph columns (session.go): the record's parents (a copy),
	// its live answer's tool calls and whether they differed from the trace's.
	Parents          []int32
	After            []int32 // wait-only edges (trace.Record.After), a copy
	ToolCalls        int32
	ToolCallMismatch bool
	// AudioSeconds is the audio clip a speech-to-text request uploaded
	// (speech.go), 0 for the other APIs.
	AudioSeconds float64
	// Media is what the request sent of media (media.go), nil for none.
	Media *RequestMedia

	evOff int // index of its first event in accumulator.eventTimes (success) or failTimes (-1: not kept)
	// gapOff is the index of its first gap in the run's per-event ITL
	// samples (the gaps of its sorted events, in order), -1 when they are
	// not there as such (another endpoint's, a histogram's, or no gap).
	gapOff int
}

// Derive computes the metrics of one record under opts' definitions. Its
// times must already be aligned; file is recorded as Request.File.
func Derive(r *trace.Record, file int, opts Options) Request {
	q := Request{ErrorMessage: r.ErrorMessage, Truncated: r.ErrorKind == trace.ErrStreamTruncated,
		RequestID: r.RequestID, ConversationID: r.ConversationID, Turn: r.Turn,
		Shard: r.Shard, Attempt: r.Attempt, Warmup: r.Warmup, Target: r.Target, File: file,
		Status: r.Status, ErrorKind: string(r.ErrorKind), NonStreaming: r.NonStreaming,
		IntendedNs: r.IntendedNs, SlotNs: r.SlotNs, SentNs: r.SentNs, DoneNs: r.DoneNs, StartNs: opts.Start.of(r),
		Events:       int32(len(r.EventNs)),
		PromptTokens: r.PromptTokens,
		OutputTokens: r.CompletionTokens,
		CachedTokens: r.CachedTokens,
		QueueNs:      r.SlotNs - r.IntendedNs,
		SendDelayNs:  r.SentNs - r.SlotNs,
	}
	q.InputTokens, q.Model = r.InputTokens, r.Model
	q.Endpoint, q.ReasoningTokens, q.Items = r.Endpoint, r.ReasoningTokens, r.Items
	if q.Endpoint == "" {
		q.Endpoint = trace.EndpointChat
	}
	q.AudioSeconds = audioSeconds(r, q.Endpoint)
	q.Media = requestMedia(r)
	generates := trace.Generates(q.Endpoint)
	q.NonStreaming = q.NonStreaming || !generates
	if len(r.Parents) > 0 {
		q.Parents = slices.Clone(r.Parents) // the scanner's lists are reused
	}
	if len(r.After) > 0 {
		q.After = slices.Clone(r.After)
	}
	q.ToolCalls, q.ToolCallMismatch = r.ToolCalls, r.ToolCallMismatch
	// One pass over the tokens, in locals (the per-event part of Derive).
	firstContent, lastContent := -1, -1
	var tokens, content int32
	for i, n := range r.EventTokens {
		tokens += n
		if n > 0 {
			if firstContent < 0 {
				firstContent = i
			}
			lastContent = i
			content++
		}
	}
	q.ClientOutputTokens, q.ContentEvents = tokens, content
	if firstContent >= 0 {
		q.FirstContentNs, q.FirstContentTokens = r.EventNs[firstContent], r.EventTokens[firstContent]
		q.LastContentNs = r.EventNs[lastContent]
	}
	// vLLM multi-turn's client only chats: the other APIs stay out of its table.
	q.MultiTurnValid = generates && r.Status == 200 && (r.ErrorKind == "" || EndedCleanly(r)) && (r.NonStreaming || q.ContentEvents > 0)
	if q.PromptTokens < 0 {
		q.PromptTokens = r.InputTokens
	}
	if q.OutputTokens <= 0 {
		q.OutputTokens = tokens
	}
	if n := len(r.EventNs); n > 0 {
		q.FirstNs, q.LastNs = r.EventNs[0], r.EventNs[n-1]
		q.TTFTNs = q.FirstNs - q.StartNs
		q.E2ELNs = q.LastNs - q.StartNs
		q.CorrectedTTFTNs = q.FirstNs - q.IntendedNs
		q.CorrectedE2ELNs = q.LastNs - q.IntendedNs
		if q.NonStreaming {
			q.TTFTNs, q.CorrectedTTFTNs = 0, 0
		} else if a := int(max(r.FirstAnswerEvent, 0)); a < n {
			q.TTFONs, q.Answered = r.EventNs[a]-q.StartNs, true
			q.thoughtFirst = slices.ContainsFunc(r.EventTokens[:a], func(t int32) bool { return t > 0 })
		} else {
			q.thoughtFirst = q.ClientOutputTokens > 0
		}
		if !q.NonStreaming && n > 1 {
			q.TTSTNs = r.EventNs[1] - r.EventNs[0]
		}
		if q.thoughtFirst {
			q.ReasoningNs = q.LastNs - q.FirstNs
			if q.Answered {
				q.ReasoningNs = q.TTFONs - q.TTFTNs
			}
		}
		if !q.NonStreaming && q.OutputTokens > 1 {
			q.TPOTNs = float64(q.E2ELNs-q.TTFTNs) / float64(q.OutputTokens-1)
			q.ITLMeanNs = float64(q.LastNs-q.FirstNs) / float64(q.OutputTokens-1)
			q.ITLContentNs = float64(q.LastContentNs-q.FirstContentNs) / float64(q.OutputTokens-1)
		}
	}
	if !generates {
		// One body of vectors or scores: its latency runs to the end of
		// the body, and no event is needed to succeed.
		q.E2ELNs, q.CorrectedE2ELNs = r.DoneNs-q.StartNs, r.DoneNs-q.IntendedNs
		q.OutputTokens = 0
	}
	if generates {
		q.Reasoning = max(q.ReasoningTokens, 0)
		if q.ReasoningTokens < 0 && !q.NonStreaming {
			q.ReasoningCounted = true
			for i := 0; i < int(r.FirstAnswerEvent) && i < len(r.EventTokens); i++ {
				q.Reasoning += r.EventTokens[i]
			}
		}
		q.Reasoning = min(q.Reasoning, max(q.OutputTokens, 0))
		q.Answer = q.OutputTokens - q.Reasoning
	}
	q.Success = opts.Success.succeeded(r, generates)
	if !q.Success && q.ErrorKind == "" {
		if r.Status/100 != 2 || (opts.Success == SuccessVLLM && r.Status != 200) || !generates {
			q.ErrorKind = string(trace.ErrHTTPStatus)
		} else {
			q.ErrorKind = ErrNoEvents
		}
	}
	return q
}

// succeeded applies the rule to a record; a request to a non-generating
// endpoint (generates false) needs no event: its answer is one body.
func (rule SuccessRule) succeeded(r *trace.Record, generates bool) bool {
	if !generates {
		if rule == SuccessStrict {
			return r.ErrorKind == "" && r.Status/100 == 2
		}
		return r.ErrorKind == "" && r.Status == 200
	}
	if len(r.EventNs) == 0 {
		return false
	}
	if rule == SuccessStrict {
		return r.ErrorKind == "" && r.Status/100 == 2
	}
	return r.Status == 200 && (r.ErrorKind == "" || EndedCleanly(r))
}

// cleanEndPrefix starts the message record.Stream.Fill gives a stream whose
// body ended without data: [DONE] and without a read error; a broken
// connection is recorded as "reading the stream after N events: ...".
const cleanEndPrefix = "the body ended after "

// EndedCleanly reports whether a stream_truncated record's body ended
// without an error (the server closed the response properly, only
// data: [DONE] was missing): vLLM's client raises no exception there and
// counts the request as a success. A connection broken mid-body is an
// exception (aiohttp's payload error), so a failure under both rules.
func EndedCleanly(r *trace.Record) bool {
	return r.ErrorKind == trace.ErrStreamTruncated && strings.HasPrefix(r.ErrorMessage, cleanEndPrefix)
}

// endNs is when the request stopped occupying the client: DoneNs, or its
// last known time if DoneNs is missing.
func (q *Request) endNs() int64 {
	return max(q.DoneNs, q.LastNs, q.SentNs)
}
