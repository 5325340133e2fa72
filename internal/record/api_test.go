package record

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apis"
	"github.com/tracekit/tracekit/trace"
)

// apiStream encodes n one-token text events (after reasoning events, when
// reasoning) with API name's encoder, the mock's way.
func apiStream(name api.Name, n int, reasoning bool) []byte {
	spec, _ := apis.Lookup(name)
	e := spec.NewEncoder()
	h := api.Head{ID: "b", Model: "meta-llama/Llama-3.1-8B-Instruct", Created: 1, Prompt: 812, Cached: 0,
		Completion: int64(n), Finish: api.FinishLength, IncludeUsage: true}
	b := e.Begin(nil, &h)
	for i := range n {
		piece := []byte(fmt.Sprintf(" tok%d", i))
		if reasoning && i < n/2 {
			b = e.Reasoning(b, piece, 1)
		} else {
			b = e.Text(b, piece, 1)
		}
	}
	b = e.End(b, api.Usage{Prompt: 812, Completion: int64(n), Cached: 0, Reasoning: -1})
	return e.Done(b)
}

// The Stream reads whichever API it is set to, keeps one decoder per API
// across switches (no allocation once each has been made), and refuses an
// API the table does not know without changing its own.
func TestSetAPI(t *testing.T) {
	s := NewStream(byteCounter{})
	if s.API() != api.Chat {
		t.Fatalf("a new Stream reads %q, want chat", s.API())
	}
	streams := map[api.Name][]byte{}
	for _, name := range []api.Name{api.Chat, api.Responses, api.Messages, api.Completions} {
		streams[name] = apiStream(name, 6, name != api.Completions)
	}
	var rec trace.Record
	run := func() {
		for _, name := range []api.Name{api.Responses, api.Chat, api.Messages, api.Completions} {
			if err := s.SetAPI(name); err != nil {
				t.Fatal(err)
			}
			s.Feed(streams[name], 1)
			s.Fill(&rec)
			if k, msg := s.Verdict(); k != trace.ErrNone || !s.Done() || len(rec.EventNs) == 0 {
				t.Fatalf("%s: %s %q done %v, %d events", name, k, msg, s.Done(), len(rec.EventNs))
			}
		}
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Fatalf("%v allocations switching APIs", n)
	}
	if err := s.SetAPI("speech"); err == nil || !strings.Contains(err.Error(), `"speech"`) || s.API() != api.Completions {
		t.Fatalf("unknown API: err %v, API now %q", err, s.API())
	}
	// SetAPI resets: nothing of the last response survives.
	if err := s.SetAPI(api.Chat); err != nil || s.Text() != "" || s.Events() != 0 || s.Done() {
		t.Fatalf("after SetAPI: err %v text %q events %d done %v", err, s.Text(), s.Events(), s.Done())
	}
}

// A reasoning stream of each API gives the same record: its events, their
// tokens (counted from text and reasoning alike), the usage.
func TestAPIsAgree(t *testing.T) {
	var first trace.Record
	for i, name := range []api.Name{api.Chat, api.Responses, api.Messages} {
		s := NewStream(wordCounter{})
		if err := s.SetAPI(name); err != nil {
			t.Fatal(err)
		}
		s.Feed(apiStream(name, 8, true), 5)
		r := fill(s)
		if name == api.Chat { // chat's role-only chunk is an event of its own
			r.EventNs, r.EventTokens = r.EventNs[1:], r.EventTokens[1:]
		}
		if r.ErrorKind != "" || len(r.EventNs) != 8 || s.Text() != " tok4 tok5 tok6 tok7" || s.Reasoning() != " tok0 tok1 tok2 tok3" {
			t.Fatalf("%s: %s %q, %d events, text %q reasoning %q", name, r.ErrorKind, r.ErrorMessage, len(r.EventNs), s.Text(), s.Reasoning())
		}
		if i == 0 {
			first = r
		} else if !reflect.DeepEqual(r, first) {
			t.Fatalf("%s's record differs from chat's:\n%+v\n%+v", name, r, first)
		}
	}
}

// FuzzDecoders checks, for every API's decoder, that no input panics and
// that the outcome does not depend on how the bytes were split into reads.
func FuzzDecoders(f *testing.F) {
	for _, name := range []api.Name{api.Responses, api.Messages} {
		f.Add(apiStream(name, 3, true), uint16(40), uint8(0))
	}
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":99999,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"x\"}}\n\n"), uint16(7), uint8(1))
	f.Add([]byte("data: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"a\",\"delta\":\"\\u12\"}\n\ndata: {\"type\":\"error\",\"error\":\"x\"}\n\n"), uint16(3), uint8(2))
	f.Add([]byte(`{"results":[1,2],"usage":{"total_tokens":3}}`), uint16(5), uint8(3))
	names := []api.Name{api.Chat, api.Responses, api.Messages, api.Embeddings, api.Rerank, api.Score}
	f.Fuzz(func(t *testing.T, data []byte, split uint16, which uint8) {
		name := names[int(which)%len(names)]
		whole, parts := NewStream(wordCounter{}), NewStream(wordCounter{})
		if whole.SetAPI(name) != nil || parts.SetAPI(name) != nil {
			t.Fatal("SetAPI failed")
		}
		whole.Feed(data, 1)
		at := int(split) % (len(data) + 1)
		parts.Feed(data[:at], 1)
		parts.Feed(data[at:], 1)
		a, b := fill(whole), fill(parts)
		if !reflect.DeepEqual(a, b) || whole.Text() != parts.Text() || whole.Reasoning() != parts.Reasoning() || whole.Done() != parts.Done() || whole.Unknown() != parts.Unknown() {
			t.Fatalf("%s: split at %d changed the outcome:\nwhole %+v %q\nparts %+v %q", name, at, a, whole.Text(), b, parts.Text())
		}
		if len(a.EventNs) != len(a.EventTokens) {
			t.Fatalf("parallel lists differ: %d times, %d tokens", len(a.EventNs), len(a.EventTokens))
		}
		s := NewStream(nil)
		s.SetAPI(name)
		s.FeedJSON(data, 1) // a body: must not panic either
		fill(s)
	})
}

// BenchmarkDecoders measures each API's decoder in the Stream on a stream
// of 256 one-token text events, fed in 1.5 KB reads as BenchmarkFeed
// does: chat is BenchmarkFeed's vLLM-like stream, Responses and Messages
// the mock's encoders' (vLLM's shapes). outputs/s counts the token events,
// events/s every SSE event (Responses and Messages have a few more around
// the deltas); allocs/op must be 0.
func BenchmarkDecoders(b *testing.B) {
	const n = 256
	for _, c := range []struct {
		name api.Name
		data []byte
	}{
		{api.Chat, benchStream(n, false)},
		{api.Responses, apiStream(api.Responses, n, false)},
		{api.Messages, apiStream(api.Messages, n, false)},
	} {
		b.Run(string(c.name), func(b *testing.B) {
			s := NewStream(oneCounter{})
			if err := s.SetAPI(c.name); err != nil {
				b.Fatal(err)
			}
			sse := strings.Count(string(c.data), "\n\n")
			var rec trace.Record
			run := func() {
				s.Reset()
				for p := c.data; len(p) > 0; {
					k := min(1500, len(p))
					s.Feed(p[:k], 1)
					p = p[k:]
				}
				s.Fill(&rec)
			}
			run()
			if k, msg := s.Verdict(); k != trace.ErrNone || s.Events() < n {
				b.Fatalf("%s: %s %q, %d events", c.name, k, msg, s.Events())
			}
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				run()
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(n)*float64(b.N)/sec, "outputs/s")
			b.ReportMetric(float64(sse)*float64(b.N)/sec, "events/s")
		})
	}
}

// FirstAnswer is the first event with answer text or a tool call, in
// every API: after the reasoning events of a reasoning stream, the first
// without reasoning, Events() for a stream of reasoning only. (Chat's
// first chunk, the role's, is an event without text: chat's answer events
// come one later.) Finding it allocates nothing.
func TestFirstAnswer(t *testing.T) {
	s := NewStream(byteCounter{})
	for _, name := range []api.Name{api.Chat, api.Responses, api.Messages} {
		lead := 0
		if name == api.Chat {
			lead = 1
		}
		for _, c := range []struct {
			reasoning bool
			n, want   int
		}{{true, 6, 3}, {false, 4, 0}} {
			if err := s.SetAPI(name); err != nil {
				t.Fatal(err)
			}
			s.Feed(apiStream(name, c.n, c.reasoning), 1)
			if got := s.FirstAnswer(); got != lead+c.want || s.Events() < c.n {
				t.Errorf("%s reasoning %v: first answer %d of %d events; want %d", name, c.reasoning, got, s.Events(), lead+c.want)
			}
		}
		// Reasoning only.
		spec, _ := apis.Lookup(name)
		e := spec.NewEncoder()
		h := api.Head{ID: "b", Model: "m", Completion: 2, Finish: api.FinishStop, IncludeUsage: true}
		b := e.Reasoning(e.Begin(nil, &h), []byte("hmm"), 1)
		b = e.Done(e.End(b, api.Usage{Prompt: 1, Completion: 1, Cached: 0, Reasoning: 1}))
		s.SetAPI(name)
		s.Feed(b, 1)
		if s.FirstAnswer() != s.Events() || s.Events() < 1 || s.Usage().Reasoning != 1 {
			t.Errorf("%s reasoning only: first answer %d of %d events, reasoning tokens %d", name, s.FirstAnswer(), s.Events(), s.Usage().Reasoning)
		}
		// A tool call is an answer.
		b = e.Reasoning(e.Begin(nil, &h), []byte("hmm"), 1)
		b = e.ToolArgs(e.ToolCall(b, "call_1", "f", []byte(`{"a":`), 1), []byte(`1}`), 1)
		b = e.Done(e.End(b, api.NoUsage))
		s.SetAPI(name)
		s.Feed(b, 1)
		if s.FirstAnswer() != lead+1 || s.ToolCalls() != 1 {
			t.Errorf("%s tool call: first answer %d, %d calls", name, s.FirstAnswer(), s.ToolCalls())
		}
	}
	stream := apiStream(api.Chat, 6, true)
	s.SetAPI(api.Chat)
	run := func() {
		s.Reset()
		s.Feed(stream, 1)
		_ = s.FirstAnswer()
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
