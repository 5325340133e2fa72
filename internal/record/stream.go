package record

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"unsafe"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apis"
	"github.com/tracekit/tracekit/internal/api/jsonscan"
	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/trace"
)

// TokenCounter counts the tokens of a text. tokenizer.Tokenizer satisfies
// it. Count must not retain text: Stream passes views of its own buffers.
type TokenCounter interface{ Count(text string) int }

// maxEvent bounds one SSE line or event; a longer one is recorded as
// malformed and skipped, so a broken server cannot grow memory without end.
const maxEvent = 8 << 20

// Stream is one response's parse state: it splits a Server-Sent Events body
// into events, stamps each event with the time of the network read that
// completed it, hands each event to the decoder of the request's API
// (internal/api), and keeps the event times, the text and the usage. Reuse
// it across requests (Reset) so the hot path allocates nothing once its
// buffers have grown.
//
// A Stream is not safe for concurrent use; each request goroutine owns one.
type Stream struct {
	counter TokenCounter

	// The request's API and its decoder; decs keeps each decoder made so
	// far, so switching APIs between requests allocates once per API.
	api  api.Name
	dec  api.Decoder
	decs []namedDecoder

	// SSE line state.
	line      []byte // an incomplete line carried over to the next Feed
	data      []byte // data lines of the event being assembled
	name      []byte // the "event:" field of the event being assembled
	hasData   bool
	crPending bool // the last byte was '\r': a following '\n' ends nothing
	skipping  bool // discarding the rest of an oversized line

	// Parsed outcome.
	out       api.Out   // text, reasoning, tool calls: the decoder appends
	ev        api.Event // the event being decoded
	evNs      []int64
	evContent []int32 // end offset of each event's text in out.Text
	evReason  []int32 // end offset of each event's text in out.Reasoning
	evCum     []int32 // cumulative usage.completion_tokens carried by the event, -1 if none
	usage     api.Usage
	// firstAnswer is the index of the first output event that carried
	// answer text or a tool call, -1 until one did.
	firstAnswer int
	done        bool
	events      int // data events parsed, of any kind
	unknown     int // events of a type the decoder does not know
	errKind     trace.ErrorKind
	errMsg      string
	lastStamp   int64
}

type namedDecoder struct {
	name api.Name
	dec  api.Decoder
}

// NewStream returns a Stream for chat and completions responses (SetAPI
// picks another API), counting tokens with counter when the server
// reports no continuous usage. counter may be nil: each event with text
// then counts as one token (the usual one-token-per-event stream).
func NewStream(counter TokenCounter) *Stream {
	s := &Stream{counter: counter}
	if err := s.SetAPI(api.Chat); err != nil {
		panic(err) // the table always has chat
	}
	return s
}

// SetAPI makes the Stream read responses of API name from now on; call it
// before the response's first Feed. It resets the Stream. An API the table
// (internal/api/apis) does not know is an error, and the Stream keeps its
// API.
func (s *Stream) SetAPI(name api.Name) error {
	if name == s.api && s.dec != nil {
		s.Reset()
		return nil
	}
	for _, d := range s.decs {
		if d.name == name {
			s.api, s.dec = name, d.dec
			s.Reset()
			return nil
		}
	}
	spec, ok := apis.Lookup(name)
	if !ok {
		return fmt.Errorf("record: no decoder for API %q", name)
	}
	d := spec.NewDecoder()
	s.decs = append(s.decs, namedDecoder{name, d})
	s.api, s.dec = name, d
	s.Reset()
	return nil
}

// API is the API whose responses the Stream reads.
func (s *Stream) API() api.Name { return s.api }

// maxExpect bounds what Expect reserves: a trace's max_tokens can be far
// above what a server streams, and the slices still grow past it.
const maxExpect = 4096

// Expect reserves room for the per-event figures of a response of about
// events events (at most maxExpect), so that a long stream does not grow
// them one doubling at a time. Call it after SetAPI or Reset.
func (s *Stream) Expect(events int) {
	events = min(events, maxExpect)
	if events <= 0 {
		return
	}
	s.evNs = slices.Grow(s.evNs, events)
	s.evContent = slices.Grow(s.evContent, events)
	s.evReason = slices.Grow(s.evReason, events)
	s.evCum = slices.Grow(s.evCum, events)
}

// Reset clears the state for the next response, keeping the buffers.
func (s *Stream) Reset() {
	s.line, s.data, s.name = s.line[:0], s.data[:0], s.name[:0]
	s.hasData, s.crPending, s.skipping = false, false, false
	s.out.Reset()
	s.evNs, s.evContent, s.evReason, s.evCum = s.evNs[:0], s.evContent[:0], s.evReason[:0], s.evCum[:0]
	s.usage = api.NoUsage
	s.firstAnswer = -1
	s.done, s.events, s.unknown = false, 0, 0
	s.errKind, s.errMsg = "", ""
	s.lastStamp = 0
	s.dec.Reset()
}

// ReadBody reads body until EOF or an error, stamping each read with now()
// right after Read returns and before parsing, so parsing time never shifts
// a stamp. buf is caller-owned scratch (a few KiB is plenty). It returns the
// read error, or nil at EOF.
func (s *Stream) ReadBody(body io.Reader, buf []byte, now func() int64) error {
	for {
		n, err := body.Read(buf)
		t := now()
		if n > 0 {
			s.Feed(buf[:n], t)
		}
		if err == io.EOF {
			s.finish()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// End ends the body: what ReadBody does at EOF (the last event may lack
// its blank line), for a caller that feeds the body itself.
func (s *Stream) End() { s.finish() }

// Feed parses every SSE event completed by p and stamps it with stampNs,
// the time the read that returned p returned. Events may be split across
// Feeds or several may arrive in one; lines end in "\n", "\r\n" or "\r";
// ':' comments, "id:", "retry:" are ignored; "data:" may or may not be
// followed by a space. A line starting with '{' outside any field is taken
// as a whole JSON event (newline-delimited JSON, or a JSON error body where
// a stream was expected).
func (s *Stream) Feed(p []byte, stampNs int64) {
	s.lastStamp = stampNs
	for len(p) > 0 {
		if s.crPending {
			s.crPending = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		j := indexEOL(p)
		if j < 0 {
			s.carry(p)
			return
		}
		line := p[:j]
		if len(s.line) > 0 || s.skipping {
			s.carry(line)
			line = s.line
		}
		s.crPending = p[j] == '\r'
		p = p[j+1:]
		if !s.skipping {
			s.processLine(line, stampNs)
		}
		s.line, s.skipping = s.line[:0], false
	}
}

// carry keeps part of an unfinished line, dropping lines beyond maxEvent.
func (s *Stream) carry(p []byte) {
	if s.skipping {
		return
	}
	if len(s.line)+len(p) > maxEvent {
		s.fail(trace.ErrMalformed, fmt.Sprintf("event %d: line longer than %d bytes, skipped", s.events+1, maxEvent))
		s.line, s.skipping = s.line[:0], true
		return
	}
	s.line = append(s.line, p...)
}

// indexEOL returns the index of the first '\n' or '\r' in p, or -1. It
// looks in windows that double from eolWindow bytes, each scanned for '\n'
// and then, before it, for '\r' (bytes.IndexByte: vectorized), so a line
// of L bytes costs at most about 2L + eolWindow bytes scanned whichever
// line ends the stream uses: the whole Feed stays linear, as a byte loop
// is, at a fraction of its cost.
func indexEOL(p []byte) int {
	if len(p) > 0 && (p[0] == '\n' || p[0] == '\r') { // the blank line ending every event
		return 0
	}
	for start, w := 0, eolWindow; start < len(p); start, w = start+w, 2*w {
		seg := p[start:min(start+w, len(p))]
		n := bytes.IndexByte(seg, '\n')
		if n >= 0 {
			seg = seg[:n]
		}
		if r := bytes.IndexByte(seg, '\r'); r >= 0 {
			return start + r
		}
		if n >= 0 {
			return start + n
		}
	}
	return -1
}

// eolWindow is indexEOL's first window: about one SSE data line.
const eolWindow = 256

func (s *Stream) processLine(line []byte, stamp int64) {
	if len(line) == 0 { // a blank line ends the event
		if s.hasData {
			s.dispatch(s.data, stamp)
		}
		s.data, s.hasData, s.name = s.data[:0], false, s.name[:0]
		return
	}
	if line[0] == ':' {
		return
	}
	name, value := line, line[len(line):]
	if len(line) >= 5 && string(line[:5]) == "data:" { // nearly every line: no search for the colon
		name, value = line[:4], line[5:]
	} else if c := bytes.IndexByte(line, ':'); c >= 0 {
		name, value = line[:c], line[c+1:]
	}
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if len(s.data)+len(value) > maxEvent {
			s.fail(trace.ErrMalformed, fmt.Sprintf("event %d: larger than %d bytes, skipped", s.events+1, maxEvent))
			s.data, s.hasData = s.data[:0], false
			return
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data, s.hasData = append(s.data, value...), true
	case "event":
		s.name = append(s.name[:0], value...)
	default:
		if line[0] == '{' {
			s.dispatch(line, stamp)
		}
	}
}

// dispatch hands one complete event's data to the decoder and keeps what
// it found.
func (s *Stream) dispatch(data []byte, stamp int64) {
	data = bytes.TrimSpace(data)
	ev := &s.ev
	ev.Reset()
	if string(data) == "[DONE]" { // not a numbered event: only its meaning is the API's
		s.dec.Event(s.name, data, &s.out, ev)
		s.done = s.done || ev.End
		return
	}
	s.events++
	s.decoded(data, stamp, false)
}

// decoded runs the decoder on one event's data (or a whole body) and keeps
// what it found: the first error, the usage, the event's stamp and text
// offsets when it is an output event.
func (s *Stream) decoded(data []byte, stamp int64, body bool) {
	ev, out := &s.ev, &s.out
	out.Event = len(s.evNs)
	content, reason := len(out.Text), len(out.Reasoning)
	calls, args := out.Tools.Len(), out.Tools.ArgLen()
	if body {
		s.dec.Body(data, out, ev)
	} else {
		s.dec.Event(s.name, data, out, ev)
	}
	if ev.Fault != "" {
		s.fail(trace.ErrMalformed, ev.Fault)
	}
	if ev.Invalid {
		out.Text, out.Reasoning = out.Text[:content], out.Reasoning[:reason]
		s.fail(trace.ErrMalformed, fmt.Sprintf("event %d: not a valid JSON object: %s", s.events, snippet(data)))
		return
	}
	switch {
	case ev.ServerError:
		msg := redact.Patterns(string(ev.ErrMsg))
		if msg == "" {
			msg = snippet(data)
		}
		if len(ev.ErrType) > 0 {
			msg = "(" + string(ev.ErrType) + ") " + msg
		}
		s.fail(trace.ErrMalformed, fmt.Sprintf("event %d: server error: %s", s.events, msg))
	case ev.WrongAPI != "":
		s.fail(api.ErrWrongAPI, fmt.Sprintf("event %d: a %s answer where %s was asked for: %s", s.events, ev.WrongAPI, s.api, snippet(data)))
	}
	if ev.Unknown {
		s.unknown++
	}
	ev.Usage.Merge(&s.usage)
	s.done = s.done || ev.End
	if !ev.Output {
		return
	}
	if s.firstAnswer < 0 && (len(out.Text) > content || out.Tools.Len() > calls || out.Tools.ArgLen() > args) {
		s.firstAnswer = len(s.evNs)
	}
	s.evNs = append(s.evNs, stamp)
	s.evContent = append(s.evContent, int32(len(out.Text)))
	s.evReason = append(s.evReason, int32(len(out.Reasoning)))
	s.evCum = append(s.evCum, clamp32(ev.Usage.Completion))
}

// clamp32 narrows a count for a record's int32 columns; below zero (not
// reported) is -1.
func clamp32(v int64) int32 {
	if v < 0 {
		return -1
	}
	return int32(min(v, 1<<31-1))
}

// fail records the first error of the stream; later ones are consequences.
func (s *Stream) fail(kind trace.ErrorKind, msg string) {
	if s.errKind == "" {
		s.errKind, s.errMsg = kind, msg
	}
}

// snippet quotes the start of a bad event for an error message.
func snippet(b []byte) string {
	const max = 120
	if len(b) > max {
		return fmt.Sprintf("%q... (%d bytes)", b[:max], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// finish handles the end of the body: an event whose blank line never came
// still counts if it is complete ([DONE] or valid JSON); a half-received one
// is dropped (the stream is then reported truncated, not malformed).
func (s *Stream) finish() {
	if len(s.line) > 0 && !s.skipping {
		line := s.line
		s.line = s.line[:0]
		if bytes.HasPrefix(line, []byte("data:")) || line[0] == '{' {
			if line[0] == '{' && !jsonscan.Valid(line) {
				return
			}
			s.processLine(line, s.lastStamp)
		}
	}
	s.line, s.skipping = s.line[:0], false
	if s.hasData {
		if d := bytes.TrimSpace(s.data); string(d) == "[DONE]" || jsonscan.Valid(d) {
			s.dispatch(s.data, s.lastStamp)
		}
		s.data, s.hasData = s.data[:0], false
	}
}

// FeedJSON handles a non-streaming response: one JSON body, one event at
// stampNs carrying all the text. Its usage makes the token count exact.
func (s *Stream) FeedJSON(body []byte, stampNs int64) {
	s.lastStamp = stampNs
	s.ev.Reset()
	s.events++
	s.decoded(bytes.TrimSpace(body), stampNs, true)
	if s.errKind == "" {
		s.done = true
	}
}

// Done reports whether the stream ended with its API's terminal event
// (chat: data: [DONE]; Messages: message_stop; Responses: a terminal
// response event), or a non-streaming body parsed cleanly.
func (s *Stream) Done() bool { return s.done }

// Events is the number of events listed so far (those with non-empty
// choices).
func (s *Stream) Events() int { return len(s.evNs) }

// Text is the assistant content received (reasoning excluded), which replay
// carries into the next turn's history.
func (s *Stream) Text() string { return string(s.out.Text) }

// Reasoning is the reasoning text received.
func (s *Stream) Reasoning() string { return string(s.out.Reasoning) }

// Usage is what the server reported of the request's tokens so far, each
// field -1 when not reported: the reasoning tokens too, which a record has
// no column for.
func (s *Stream) Usage() api.Usage { return s.usage }

// Items is the number of embeddings, rerank results or scores a
// non-generating API returned, -1 when none were counted.
func (s *Stream) Items() int64 { return s.out.Items }

// FirstAnswer is the index among the listed events of the first one that
// carried answer text or a tool call rather than reasoning; Events() when
// none did (a stream of reasoning only, or no output).
func (s *Stream) FirstAnswer() int {
	if s.firstAnswer < 0 {
		return len(s.evNs)
	}
	return s.firstAnswer
}

// ResponseID is the id the server gave the response (Responses), "" when
// it gave none: what a stateful next request chains to. It allocates.
func (s *Stream) ResponseID() string { return string(s.out.ResponseID) }

// Unknown is the number of events of a type the API's decoder does not
// know: tolerated (the APIs ask clients to), counted so a report can say a
// server sends them.
func (s *Stream) Unknown() int { return s.unknown }

// Fill copies the parsed outcome into rec, reusing rec's slices:
// EventNs/EventTokens, PromptTokens/CompletionTokens/CachedTokens (-1 when
// not reported), the media tokens by kind (0 when not reported) and
// TokensExact. It leaves ErrorKind and ErrorMessage
// alone: the parser's finding is Verdict's, and the caller, who also
// knows how the transport fared, decides the record's error kind.
func (s *Stream) Fill(rec *trace.Record) {
	s.finish()
	rec.EventNs = append(rec.EventNs[:0], s.evNs...)
	rec.EventTokens = rec.EventTokens[:0]
	rec.TokensExact = s.continuousUsage()
	var prevCum int32
	var prevContent, prevReason int32
	for i := range s.evNs {
		var n int32
		if rec.TokensExact {
			n, prevCum = s.evCum[i]-prevCum, s.evCum[i]
		} else {
			n = int32(s.count(s.out.Text[prevContent:s.evContent[i]]) + s.count(s.out.Reasoning[prevReason:s.evReason[i]]))
		}
		prevContent, prevReason = s.evContent[i], s.evReason[i]
		rec.EventTokens = append(rec.EventTokens, n)
	}
	if !rec.TokensExact {
		s.addToolTokens(rec.EventTokens)
	}
	rec.ToolCalls = int32(s.out.Tools.Len())
	rec.PromptTokens, rec.CompletionTokens, rec.CachedTokens = clamp32(s.usage.Prompt), clamp32(s.usage.Completion), clamp32(s.usage.Cached)
	m := s.usage.Media // 0: not reported
	rec.ImageTokens, rec.VideoTokens, rec.AudioTokens = clamp32(m.Image), clamp32(m.Video), clamp32(m.Audio)
}

// FillAnswer sets the record's fields that say how the answer was made,
// beyond chat's: its reasoning tokens (the usage's, -1 when not reported),
// its first answer event (len(EventNs) when none came) and its items
// (embeddings, rerank results, scores; 0 for none). Call it after Fill.
func (s *Stream) FillAnswer(rec *trace.Record) {
	rec.ReasoningTokens = clamp32(s.Usage().Reasoning)
	rec.FirstAnswerEvent = int32(min(s.FirstAnswer(), len(rec.EventNs)))
	rec.Items = 0
	if n := s.Items(); n > 0 {
		rec.Items = int32(min(n, 1<<31-1))
	}
}

// Verdict reports what the parser saw of the body, for the caller's
// classification: trace.ErrMalformed with the first bad event or error
// object (an error the server reported in the stream included: its words
// are kept, credentials redacted), api.ErrWrongAPI for an answer in
// another API's shape, trace.ErrStreamTruncated when the body ended
// without its API's terminal event (data: [DONE], message_stop, ...; or,
// non-streaming, without a body that parsed), and trace.ErrNone with an
// empty message for a complete answer.
func (s *Stream) Verdict() (kind trace.ErrorKind, msg string) {
	s.finish()
	if s.errKind != "" {
		return s.errKind, s.errMsg
	}
	if !s.done {
		return trace.ErrStreamTruncated, fmt.Sprintf("the body ended after %d events without %s", len(s.evNs), s.dec.Terminal())
	}
	return trace.ErrNone, ""
}

// count counts the tokens of one event's text without copying it.
func (s *Stream) count(text []byte) int {
	if len(text) == 0 {
		return 0
	}
	if s.counter == nil {
		return 1
	}
	return s.counter.Count(unsafe.String(&text[0], len(text)))
}

// continuousUsage reports whether every listed event carried cumulative
// usage (vLLM's continuous_usage_stats), so per-event tokens are exact
// deltas. Zero-valued usage on events with text (Ollama's /v1/completions)
// and counts that go backwards are not continuous usage.
func (s *Stream) continuousUsage() bool {
	if len(s.evCum) == 0 {
		return false
	}
	var prev, prevContent, prevReason int32
	for i, cum := range s.evCum {
		hasText := s.evContent[i] > prevContent || s.evReason[i] > prevReason
		prevContent, prevReason = s.evContent[i], s.evReason[i]
		if cum < prev || (cum == 0 && hasText) {
			return false
		}
		prev = cum
	}
	return prev > 0 && (s.usage.Completion < 0 || s.usage.Completion >= int64(prev))
}
