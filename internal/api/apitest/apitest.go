// Package apitest drives the API packages' encoders and reads what they
// wrote back through record.Stream, the parser replay and capture use, so
// every API's tests check an encoder against its decoder (and fixtures of
// the real wire format against the decoder) the same way. Tests only.
package apitest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// Kind is what a Piece of an answer is.
type Kind int

// The pieces of a streamed answer.
const (
	Text Kind = iota
	Reasoning
	ToolCall // starts a call: ID, Name, and the first argument fragment in Text
	ToolArgs
)

// Piece is one event's worth of an answer, as the mock hands it to an
// encoder.
type Piece struct {
	Kind     Kind
	Text     string
	ID, Name string // ToolCall
	Tokens   int
}

// Encode drives enc through a whole streamed answer: Begin, the pieces,
// End with u, and Done unless noDone.
func Encode(enc api.Encoder, h *api.Head, pieces []Piece, u api.Usage, noDone bool) []byte {
	b := enc.Begin(nil, h)
	for _, p := range pieces {
		switch p.Kind {
		case Text:
			b = enc.Text(b, []byte(p.Text), p.Tokens)
		case Reasoning:
			b = enc.Reasoning(b, []byte(p.Text), p.Tokens)
		case ToolCall:
			b = enc.ToolCall(b, p.ID, p.Name, []byte(p.Text), p.Tokens)
		case ToolArgs:
			b = enc.ToolArgs(b, []byte(p.Text), p.Tokens)
		}
	}
	b = enc.End(b, u)
	if !noDone {
		b = enc.Done(b)
	}
	return b
}

// Want is what a decoded answer must be.
type Want struct {
	Text, Reasoning string
	ToolCalls       []trace.ToolCall
	ToolFinish      bool
	Usage           api.Usage
	Events          int // output events
	Kind            trace.ErrorKind
	MsgHas          string // the verdict's message contains it
	Done            bool
	Unknown         int
	Items           int64 // checked when not 0
}

// Counter counts space-separated words: simple, deterministic, and
// sensitive to exactly which text it is given.
type Counter struct{}

// Count counts the words of s.
func (Counter) Count(s string) int { return len(strings.Fields(s)) }

// Parse reads body as a response of API name through a record.Stream, fed
// in two reads split at split (or as a non-streaming body when json), and
// returns the Stream and its record with the verdict as its error kind.
func Parse(t testing.TB, name api.Name, body []byte, split int, json bool) (*record.Stream, trace.Record) {
	t.Helper()
	s := record.NewStream(Counter{})
	if err := s.SetAPI(name); err != nil {
		t.Fatal(err)
	}
	if json {
		s.FeedJSON(body, 7)
	} else {
		split = min(max(split, 0), len(body))
		s.Feed(body[:split], 1)
		s.Feed(body[split:], 2)
	}
	var r trace.Record
	s.Fill(&r)
	r.ErrorKind, r.ErrorMessage = s.Verdict()
	return s, r
}

// Check parses body at several splits and compares what came out with w.
func Check(t testing.TB, name api.Name, body []byte, json bool, w Want) {
	t.Helper()
	splits := []int{len(body), 0, 1, len(body) / 3, len(body) / 2, len(body) - 1}
	if json {
		splits = splits[:1]
	}
	for _, split := range splits {
		s, r := Parse(t, name, body, split, json)
		where := fmt.Sprintf("%s split %d", name, split)
		if got := s.Text(); got != w.Text {
			t.Errorf("%s: text %q, want %q", where, got, w.Text)
		}
		if got := s.Reasoning(); got != w.Reasoning {
			t.Errorf("%s: reasoning %q, want %q", where, got, w.Reasoning)
		}
		if got := s.AppendToolCalls(nil); !reflect.DeepEqual(got, w.ToolCalls) && (len(got) > 0 || len(w.ToolCalls) > 0) {
			t.Errorf("%s: tool calls %+v, want %+v", where, got, w.ToolCalls)
		}
		if s.ToolCallsFinish() != w.ToolFinish || int(r.ToolCalls) != len(w.ToolCalls) {
			t.Errorf("%s: tool finish %v (record %d calls), want %v", where, s.ToolCallsFinish(), r.ToolCalls, w.ToolFinish)
		}
		if got := s.Usage(); got != w.Usage {
			t.Errorf("%s: usage %+v, want %+v", where, got, w.Usage)
		}
		if len(r.EventNs) != w.Events {
			t.Errorf("%s: %d output events, want %d", where, len(r.EventNs), w.Events)
		}
		if r.ErrorKind != w.Kind || !strings.Contains(r.ErrorMessage, w.MsgHas) || (w.Kind == "") != (r.ErrorMessage == "") {
			t.Errorf("%s: verdict %q %q, want %q containing %q", where, r.ErrorKind, r.ErrorMessage, w.Kind, w.MsgHas)
		}
		if s.Done() != w.Done {
			t.Errorf("%s: done %v, want %v", where, s.Done(), w.Done)
		}
		if s.Unknown() != w.Unknown {
			t.Errorf("%s: %d unknown events, want %d", where, s.Unknown(), w.Unknown)
		}
		if w.Items != 0 && s.Items() != w.Items {
			t.Errorf("%s: %d items, want %d", where, s.Items(), w.Items)
		}
	}
}

// Fixture reads testdata/name, a recorded or hand-checked wire capture.
// Its lines starting with "#" before the first blank line are a header
// (where the shape comes from) and are dropped; the rest is the body,
// byte for byte.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(b, []byte("#")) {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return bytes.TrimPrefix(b, []byte("\n"))
}

// NoAlloc fails t if decoding body (as a stream, in reads of size step)
// allocates once the Stream's buffers have grown.
func NoAlloc(t testing.TB, name api.Name, body []byte, step int) {
	t.Helper()
	s := record.NewStream(byteCounter{})
	if err := s.SetAPI(name); err != nil {
		t.Fatal(err)
	}
	var rec trace.Record
	run := func() {
		s.Reset()
		for p := body; len(p) > 0; {
			n := min(step, len(p))
			s.Feed(p[:n], 1)
			p = p[n:]
		}
		s.Fill(&rec)
	}
	run()
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Fatalf("%s: %v allocations per stream", name, n)
	}
}

// byteCounter counts bytes: a counter that allocates nothing itself.
type byteCounter struct{}

func (byteCounter) Count(s string) int { return len(s) }
