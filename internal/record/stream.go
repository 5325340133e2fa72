package record

import (
	"bytes"
	"fmt"
	"io"
	"unsafe"

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
// completed it, and keeps the event times, the text and the usage. Reuse it
// across requests (Reset) so the hot path allocates nothing once its
// buffers have grown.
//
// A Stream is not safe for concurrent use; each request goroutine owns one.
type Stream struct {
	counter TokenCounter

	// SSE line state.
	line      []byte // an incomplete line carried over to the next Feed
	data      []byte // data lines of the event being assembled
	hasData   bool
	errEvent  bool // "event: error" preceded the data
	crPending bool // the last byte was '\r': a following '\n' ends nothing
	skipping  bool // discarding the rest of an oversized line

	// Parsed outcome.
	content   []byte // assistant content, concatenated
	reasoning []byte // reasoning_content, concatenated
	evNs      []int64
	evContent []int32 // end offset of each event's text in content
	evReason  []int32 // end offset of each event's text in reasoning
	evCum     []int32 // cumulative usage.completion_tokens carried by the event, -1 if none
	prompt    int32
	complete  int32
	cached    int32
	done      bool
	events    int // data events parsed, of any kind
	errKind   trace.ErrorKind
	errMsg    string
	lastStamp int64

	chunk chunk
	tools toolCalls // toolcalls.go
}

// NewStream returns a Stream counting tokens with counter when the server
// reports no continuous usage. counter may be nil: each event with text
// then counts as one token (the usual one-token-per-event stream).
func NewStream(counter TokenCounter) *Stream {
	s := &Stream{counter: counter}
	s.Reset()
	return s
}

// Reset clears the state for the next response, keeping the buffers.
func (s *Stream) Reset() {
	s.line, s.data = s.line[:0], s.data[:0]
	s.hasData, s.errEvent, s.crPending, s.skipping = false, false, false, false
	s.content, s.reasoning = s.content[:0], s.reasoning[:0]
	s.evNs, s.evContent, s.evReason, s.evCum = s.evNs[:0], s.evContent[:0], s.evReason[:0], s.evCum[:0]
	s.prompt, s.complete, s.cached = -1, -1, -1
	s.done, s.events = false, 0
	s.errKind, s.errMsg = "", ""
	s.lastStamp = 0
	s.tools.reset()
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
		s.data, s.hasData, s.errEvent = s.data[:0], false, false
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
		s.errEvent = string(value) == "error"
	default:
		if line[0] == '{' {
			s.dispatch(line, stamp)
		}
	}
}

// dispatch handles one complete event's data.
func (s *Stream) dispatch(data []byte, stamp int64) {
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		s.done = true
		return
	}
	s.events++
	c := &s.chunk
	c.reset(s)
	content, reason := len(s.content), len(s.reasoning)
	if !parseChunk(c, data) {
		s.content, s.reasoning = s.content[:content], s.reasoning[:reason]
		s.fail(trace.ErrMalformed, fmt.Sprintf("event %d: not a valid JSON object: %s", s.events, snippet(data)))
		return
	}
	if c.isError || s.errEvent {
		msg := string(c.errMsg)
		if msg == "" {
			msg = snippet(data)
		}
		s.fail(trace.ErrMalformed, fmt.Sprintf("event %d: server error: %s", s.events, msg))
	}
	if c.usage {
		if c.prompt >= 0 {
			s.prompt = int32(c.prompt)
		}
		if c.completion >= 0 {
			s.complete = int32(c.completion)
		}
		if c.cached >= 0 {
			s.cached = int32(c.cached)
		}
	}
	if c.choices == 0 {
		return
	}
	cum := int32(-1)
	if c.usage && c.completion >= 0 {
		cum = int32(c.completion)
	}
	s.evNs = append(s.evNs, stamp)
	s.evContent = append(s.evContent, int32(len(s.content)))
	s.evReason = append(s.evReason, int32(len(s.reasoning)))
	s.evCum = append(s.evCum, cum)
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
			if line[0] == '{' && !validJSON(line) {
				return
			}
			s.processLine(line, s.lastStamp)
		}
	}
	s.line, s.skipping = s.line[:0], false
	if s.hasData {
		if d := bytes.TrimSpace(s.data); string(d) == "[DONE]" || validJSON(d) {
			s.dispatch(s.data, s.lastStamp)
		}
		s.data, s.hasData = s.data[:0], false
	}
}

func validJSON(b []byte) bool {
	i := skipValue(b, 0, 0)
	return i >= 0 && skipWS(b, i) == len(b)
}

// FeedJSON handles a non-streaming response: one JSON body, one event at
// stampNs carrying all the text. Its usage makes the token count exact.
func (s *Stream) FeedJSON(body []byte, stampNs int64) {
	s.lastStamp = stampNs
	s.dispatch(body, stampNs)
	if s.errKind == "" {
		s.done = true
	}
}

// Done reports whether the stream ended with data: [DONE] (or a
// non-streaming body parsed cleanly).
func (s *Stream) Done() bool { return s.done }

// Events is the number of events listed so far (those with non-empty
// choices).
func (s *Stream) Events() int { return len(s.evNs) }

// Text is the assistant content received (reasoning excluded), which replay
// carries into the next turn's history.
func (s *Stream) Text() string { return string(s.content) }

// Fill copies the parsed outcome into rec, reusing rec's slices:
// EventNs/EventTokens, PromptTokens/CompletionTokens/CachedTokens (-1 when
// not reported) and TokensExact. It leaves ErrorKind and ErrorMessage
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
			n = int32(s.count(s.content[prevContent:s.evContent[i]]) + s.count(s.reasoning[prevReason:s.evReason[i]]))
		}
		prevContent, prevReason = s.evContent[i], s.evReason[i]
		rec.EventTokens = append(rec.EventTokens, n)
	}
	if !rec.TokensExact {
		s.tools.addTokens(s, rec.EventTokens)
	}
	rec.ToolCalls = int32(s.tools.n)
	rec.PromptTokens, rec.CompletionTokens, rec.CachedTokens = s.prompt, s.complete, s.cached
}

// Verdict reports what the parser saw of the body, for the caller's
// classification: trace.ErrMalformed with the first bad event or error
// object, trace.ErrStreamTruncated when the body ended without data:
// [DONE] (or, non-streaming, without a body that parsed), and
// trace.ErrNone with an empty message for a complete answer.
func (s *Stream) Verdict() (kind trace.ErrorKind, msg string) {
	s.finish()
	if s.errKind != "" {
		return s.errKind, s.errMsg
	}
	if !s.done {
		return trace.ErrStreamTruncated, fmt.Sprintf("the body ended after %d events without data: [DONE]", len(s.evNs))
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
	return prev > 0 && (s.complete < 0 || s.complete >= prev)
}
