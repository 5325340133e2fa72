package record

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// vllmChat is a vLLM-like chat stream: role-only first chunk, a
// multi-token event, usage null until the usage-only chunk, then [DONE].
const vllmChat = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" wide world"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"!\n\"é\u00e9\ud83d\ude00"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":19,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":8}}}

data: [DONE]

`

// wordCounter counts space-separated words plus one per punctuation rune:
// simple, deterministic, and sensitive to exactly which text it is given.
type wordCounter struct{}

func (wordCounter) Count(s string) int { return len(strings.Fields(s)) }

// eventEnds returns, for each event with choices in stream, the offset just
// past the line end that completes it (a blank line).
func eventEnds(stream string) []int {
	var ends []int
	for i := 0; i < len(stream); {
		j := strings.Index(stream[i:], "\n\n")
		k := strings.Index(stream[i:], "\r\n\r\n")
		var end, start int
		switch {
		case j < 0 && k < 0:
			return ends
		case k >= 0 && (j < 0 || k < j):
			start, end = i, i+k+3 // the second '\r' ends the blank line
		default:
			start, end = i, i+j+2
		}
		if strings.Contains(stream[start:end], `"choices":[{`) {
			ends = append(ends, end)
		}
		i = end
	}
	return ends
}

// fill returns the record Fill makes, with the parser's Verdict as its
// error kind.
func fill(s *Stream) trace.Record {
	var r trace.Record
	s.Fill(&r)
	r.ErrorKind, r.ErrorMessage = s.Verdict()
	return r
}

func TestVLLMChatEverySplit(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n"} {
		stream := strings.ReplaceAll(vllmChat, "\n\n", eol+eol)
		ends := eventEnds(stream)
		if len(ends) != 4 {
			t.Fatalf("test stream has %d choice events, want 4", len(ends))
		}
		s := NewStream(wordCounter{})
		for split := 0; split <= len(stream); split++ {
			s.Reset()
			s.Feed([]byte(stream[:split]), 1)
			s.Feed([]byte(stream[split:]), 2)
			r := fill(s)
			wantNs := make([]int64, len(ends))
			for i, e := range ends {
				wantNs[i] = 2
				if e <= split {
					wantNs[i] = 1
				}
			}
			if !reflect.DeepEqual(r.EventNs, wantNs) {
				t.Fatalf("eol %q split %d: EventNs %v, want %v", eol, split, r.EventNs, wantNs)
			}
			if want := []int32{0, 1, 2, 2}; !reflect.DeepEqual(r.EventTokens, want) {
				t.Fatalf("eol %q split %d: EventTokens %v, want %v", eol, split, r.EventTokens, want)
			}
			if got, want := s.Text(), "Hello wide world!\n\"éé😀"; got != want {
				t.Fatalf("eol %q split %d: text %q, want %q", eol, split, got, want)
			}
			if r.PromptTokens != 12 || r.CompletionTokens != 7 || r.CachedTokens != 8 || r.TokensExact {
				t.Fatalf("eol %q split %d: usage %d/%d/%d exact=%v", eol, split, r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.TokensExact)
			}
			if r.ErrorKind != "" || !s.Done() {
				t.Fatalf("eol %q split %d: error %q %q done=%v", eol, split, r.ErrorKind, r.ErrorMessage, s.Done())
			}
		}
		// One byte per read: every event carries the stamp of the byte
		// that completed it.
		s.Reset()
		for i := range len(stream) {
			s.Feed([]byte{stream[i]}, int64(i))
		}
		r := fill(s)
		for i, e := range ends {
			if r.EventNs[i] != int64(e-1) {
				t.Fatalf("eol %q byte-by-byte: event %d stamped %d, want %d", eol, i, r.EventNs[i], e-1)
			}
		}
	}
}

func TestSSEVariants(t *testing.T) {
	chunk := func(content string) string {
		return `{"choices":[{"index":0,"delta":{"content":"` + content + `"}}]}`
	}
	cases := []struct {
		name     string
		stream   string
		events   int
		text     string
		kind     trace.ErrorKind
		msgHas   string
		done     bool
		tokens   []int32
		exact    bool
		complete int32
	}{
		{
			name:   "comments, no space after data:, lone CR line ends",
			stream: ": keep-alive\r\rdata:" + chunk("a") + "\r\r: ping\n\nid: 7\nretry: 100\ndata:  " + chunk("b c") + "\n\ndata:[DONE]\n\n",
			events: 2, text: "ab c", done: true, tokens: []int32{1, 2}, complete: -1,
		},
		{
			name:   "several events in one read, data split over two lines",
			stream: "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"x\"}}]}\n\ndata: " + chunk("y") + "\n\ndata: [DONE]\n\n",
			events: 2, text: "xy", done: true, tokens: []int32{1, 1}, complete: -1,
		},
		{
			name:   "error object mid-stream",
			stream: "data: " + chunk("a") + "\n\ndata: {\"error\":{\"object\":\"error\",\"message\":\"out of KV cache\",\"type\":\"InternalServerError\",\"code\":500}}\n\ndata: [DONE]\n\n",
			events: 1, text: "a", kind: trace.ErrMalformed, msgHas: "out of KV cache", done: true, tokens: []int32{1}, complete: -1,
		},
		{
			name:   "vLLM's older top-level error shape",
			stream: "data: {\"object\":\"error\",\"message\":\"bad request\",\"code\":400}\n\n",
			kind:   trace.ErrMalformed, msgHas: "bad request", complete: -1,
		},
		{
			name:   "event: error with plain text",
			stream: "data: " + chunk("a") + "\n\nevent: error\ndata: {\"detail\":\"overloaded\"}\n\n",
			events: 1, text: "a", kind: trace.ErrMalformed, msgHas: "overloaded", tokens: []int32{1}, complete: -1,
		},
		{
			name:   "malformed JSON, later events still parsed",
			stream: "data: " + chunk("a") + "\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"zz\"}}\n\ndata: " + chunk("b") + "\n\ndata: [DONE]\n\n",
			events: 2, text: "ab", kind: trace.ErrMalformed, msgHas: "event 2: not a valid JSON object", done: true, tokens: []int32{1, 1}, complete: -1,
		},
		{
			name:   "truncated: no [DONE]",
			stream: "data: " + chunk("a") + "\n\ndata: " + chunk("b"),
			events: 2, text: "ab", kind: trace.ErrStreamTruncated, msgHas: "without data: [DONE]", tokens: []int32{1, 1}, complete: -1,
		},
		{
			name:   "truncated mid-event: the half event is dropped",
			stream: "data: " + chunk("a") + "\n\ndata: {\"choices\":[{\"del",
			events: 1, text: "a", kind: trace.ErrStreamTruncated, tokens: []int32{1}, complete: -1,
		},
		{
			name:   "last line without a line end",
			stream: "data: " + chunk("a") + "\n\ndata: [DONE]",
			events: 1, text: "a", done: true, tokens: []int32{1}, complete: -1,
		},
		{
			name: "continuous usage stats: exact per-event tokens",
			stream: "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":0}}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"content\":\"abc\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"content\":\"d\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4}}\n\n" +
				"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n",
			events: 3, text: "abcd", done: true, tokens: []int32{0, 3, 1}, exact: true, complete: 4,
		},
		{
			name: "Ollama chat: no role-only chunk, finish chunk with empty content, no usage key",
			stream: "data: {\"id\":\"chatcmpl-3\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n" +
				"data: {\"id\":\"chatcmpl-3\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\" there\"},\"finish_reason\":null}]}\n\n" +
				"data: {\"id\":\"chatcmpl-3\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\n" +
				"data: {\"id\":\"chatcmpl-3\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\ndata: [DONE]\n\n",
			events: 3, text: "Hi there", done: true, tokens: []int32{1, 1, 0}, complete: 3,
		},
		{
			name: "Ollama completions: zero usage on every chunk is not continuous usage",
			stream: "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"one\",\"index\":0}],\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0}}\n\n" +
				"data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\" two\",\"index\":0}],\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0}}\n\n" +
				"data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"\",\"index\":0,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3,\"total_tokens\":7}}\n\ndata: [DONE]\n\n",
			events: 3, text: "one two", done: true, tokens: []int32{1, 1, 0}, complete: 3,
		},
		{
			name:   "reasoning_content counts but stays out of the text",
			stream: "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"think hard\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"42\",\"reasoning_content\":null}}]}\n\ndata: [DONE]\n\n",
			events: 2, text: "42", done: true, tokens: []int32{2, 1}, complete: -1,
		},
		{
			name:   "a JSON error body where a stream was expected",
			stream: `{"error":{"message":"model \"x\" not found, try pulling it first","type":"api_error"}}`,
			kind:   trace.ErrMalformed, msgHas: `model "x" not found`, complete: -1,
		},
	}
	s := NewStream(wordCounter{})
	for _, c := range cases {
		for _, split := range []int{0, len(c.stream) / 3, len(c.stream) / 2, len(c.stream) - 1} {
			s.Reset()
			s.Feed([]byte(c.stream[:split]), 10)
			s.Feed([]byte(c.stream[split:]), 20)
			r := fill(s)
			where := fmt.Sprintf("%s (split %d)", c.name, split)
			if len(r.EventNs) != c.events || s.Text() != c.text {
				t.Errorf("%s: %d events text %q, want %d %q", where, len(r.EventNs), s.Text(), c.events, c.text)
			}
			if r.ErrorKind != c.kind || !strings.Contains(r.ErrorMessage, c.msgHas) || (c.kind == "") != (r.ErrorMessage == "") {
				t.Errorf("%s: error %q %q, want %q containing %q", where, r.ErrorKind, r.ErrorMessage, c.kind, c.msgHas)
			}
			if s.Done() != c.done {
				t.Errorf("%s: done %v, want %v", where, s.Done(), c.done)
			}
			if c.tokens != nil && !reflect.DeepEqual(r.EventTokens, c.tokens) {
				t.Errorf("%s: tokens %v, want %v", where, r.EventTokens, c.tokens)
			}
			if r.TokensExact != c.exact || r.CompletionTokens != c.complete {
				t.Errorf("%s: exact %v completion %d, want %v %d", where, r.TokensExact, r.CompletionTokens, c.exact, c.complete)
			}
		}
	}
}

func TestFeedJSON(t *testing.T) {
	s := NewStream(wordCounter{})
	s.FeedJSON([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"all at once"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`), 99)
	r := fill(s)
	if !reflect.DeepEqual(r.EventNs, []int64{99}) || !reflect.DeepEqual(r.EventTokens, []int32{4}) || !r.TokensExact {
		t.Fatalf("non-streaming chat: events %v tokens %v exact %v", r.EventNs, r.EventTokens, r.TokensExact)
	}
	if s.Text() != "all at once" || r.ErrorKind != "" || r.PromptTokens != 3 || r.CachedTokens != -1 {
		t.Fatalf("non-streaming chat: text %q error %q prompt %d cached %d", s.Text(), r.ErrorKind, r.PromptTokens, r.CachedTokens)
	}
	s.Reset()
	s.FeedJSON([]byte(`{"choices":[{"text":"plain completion"}]}`), 5)
	if r := fill(s); !reflect.DeepEqual(r.EventTokens, []int32{2}) || r.TokensExact || r.ErrorKind != "" || r.CompletionTokens != -1 {
		t.Fatalf("non-streaming completion without usage: %+v", r)
	}
	s.Reset()
	s.FeedJSON([]byte(`<html>502 Bad Gateway</html>`), 5)
	if r := fill(s); r.ErrorKind != trace.ErrMalformed || !strings.Contains(r.ErrorMessage, "502 Bad Gateway") {
		t.Fatalf("HTML body: %q %q", r.ErrorKind, r.ErrorMessage)
	}
}

// TestReadBodyStampsReads streams from a real loopback server that sends
// each event only after the client has read the one before (lockstep), so
// every event arrives in a read of its own: each must carry its own read's
// stamp, later than the one before, within the read's time window.
func TestReadBodyStampsReads(t *testing.T) {
	const n = 5
	next := make(chan struct{}, n+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range n {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d \"}}]}\n\n", i)
			fl.Flush()
			select {
			case <-next:
			case <-time.After(20 * time.Second): // hang guard
				return
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := clock.Mono()
	s := NewStream(nil)
	body := &lockstepReader{r: resp.Body, next: next}
	if err := s.ReadBody(body, make([]byte, 4096), clock.Mono); err != nil {
		t.Fatal(err)
	}
	end := clock.Mono()
	r := fill(s)
	if len(r.EventNs) != n || r.ErrorKind != "" {
		t.Fatalf("got %d events, error %q %q", len(r.EventNs), r.ErrorKind, r.ErrorMessage)
	}
	for i, ts := range r.EventNs {
		if ts < start || ts > end {
			t.Fatalf("event %d stamped %d outside [%d, %d]", i, ts, start, end)
		}
		if i > 0 && ts <= r.EventNs[i-1] {
			t.Fatalf("events %d and %d, read by separate reads, stamped %d and %d: not stamped per read", i-1, i, r.EventNs[i-1], ts)
		}
	}
}

// lockstepReader tells the server (on next) each time the bytes read so
// far complete another event ("\n\n"), so the next event is sent only
// after this one was read whole.
type lockstepReader struct {
	r    io.Reader
	next chan<- struct{}
	tail byte // the last byte read, for a "\n\n" split across reads
}

func (l *lockstepReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' && l.tail == '\n' {
			l.next <- struct{}{}
			c = 0
		}
		l.tail = c
	}
	return n, err
}

// errReader returns its data then a non-EOF error.
type errReader struct {
	data []byte
	err  error
}

func (e *errReader) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestReadBodyReturnsReadError(t *testing.T) {
	boom := fmt.Errorf("connection reset")
	s := NewStream(nil)
	err := s.ReadBody(&errReader{data: []byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"), err: boom}, make([]byte, 7), func() int64 { return 1 })
	if err != boom {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if r := fill(s); len(r.EventNs) != 1 || r.ErrorKind != trace.ErrStreamTruncated {
		t.Fatalf("events %d kind %q", len(r.EventNs), r.ErrorKind)
	}
}

func TestFillReusesRecordSlices(t *testing.T) {
	s := NewStream(nil)
	s.Feed([]byte(vllmChat), 3)
	r := trace.Record{EventNs: make([]int64, 0, 16), EventTokens: make([]int32, 0, 16)}
	p := &r.EventNs[:1][0]
	s.Fill(&r)
	if &r.EventNs[0] != p {
		t.Fatal("Fill allocated a new EventNs although the record's had room")
	}
}

// FuzzFeed checks that no input panics and that the outcome does not
// depend on how the bytes were split into reads.
func FuzzFeed(f *testing.F) {
	f.Add([]byte(vllmChat), uint16(17))
	f.Add([]byte(strings.ReplaceAll(vllmChat, "\n", "\r\n")), uint16(100))
	f.Add([]byte("data:{\"choices\":[{\"text\":\"\\ud83d\\ude00\"}]}\r\r: c\rdata: [DONE]\r\r"), uint16(3))
	f.Add([]byte("data: {\"error\":\"x\"}\n\ndata: {\"choices\":[{\"delta\":{\"content\":[1,{\"a\":null}]}}]}\n\n"), uint16(0))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"\\u12\"}}]}\n\n{\"choices\":[]}\n"), uint16(9))
	f.Add([]byte("data: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n\n"), uint16(5))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		whole, parts := NewStream(wordCounter{}), NewStream(wordCounter{})
		whole.Feed(data, 1)
		at := int(split) % (len(data) + 1)
		parts.Feed(data[:at], 1)
		parts.Feed(data[at:], 1)
		a, b := fill(whole), fill(parts)
		if !reflect.DeepEqual(a, b) || whole.Text() != parts.Text() || whole.Done() != parts.Done() {
			t.Fatalf("split at %d changed the outcome:\nwhole %+v %q\nparts %+v %q", at, a, whole.Text(), b, parts.Text())
		}
		if utf8.Valid(data) && !utf8.ValidString(whole.Text()) {
			t.Fatalf("valid UTF-8 input gave invalid text %q", whole.Text())
		}
		if len(a.EventNs) != len(a.EventTokens) {
			t.Fatalf("parallel lists differ: %d times, %d tokens", len(a.EventNs), len(a.EventTokens))
		}
	})
}

func TestEventEndsHelper(t *testing.T) {
	// Guards the test helper itself: a miscount would make the split test vacuous.
	if got := eventEnds("data: {\"choices\":[{}]}\n\ndata: [DONE]\n\n"); !bytes.Equal([]byte(fmt.Sprint(got)), []byte("[24]")) {
		t.Fatalf("eventEnds = %v", got)
	}
}

// indexEOL finds the first '\n' or '\r' as a byte loop does, at every
// position and across its windows' edges, on random line ends.
func TestIndexEOL(t *testing.T) {
	loop := func(p []byte) int {
		for i, c := range p {
			if c == '\n' || c == '\r' {
				return i
			}
		}
		return -1
	}
	for _, p := range []string{"", "a", "\n", "\r", "\r\n", "\n\r", "\na", "\ra\n", "a\n", "a\r\n"} {
		if got, want := indexEOL([]byte(p)), loop([]byte(p)); got != want {
			t.Fatalf("indexEOL(%q) = %d, want %d", p, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		p := make([]byte, r.IntN(3*eolWindow+8))
		for i := range p {
			p[i] = 'a'
		}
		for range r.IntN(3) {
			if len(p) > 0 {
				p[r.IntN(len(p))] = "\n\r"[r.IntN(2)]
			}
		}
		if got, want := indexEOL(p), loop(p); got != want {
			t.Fatalf("indexEOL(%q) = %d, want %d", p, got, want)
		}
	}
}

// TestExpectReservesEventRoom: after Expect(n) a stream of n events keeps
// its per-event figures in the room reserved (no regrowth), records the
// same as without it, and Expect is bounded and ignores nonsense.
func TestExpectReservesEventRoom(t *testing.T) {
	const n = 100
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d \"}}]}\n\n", i)
	}
	b.WriteString("data: [DONE]\n\n")
	body := b.String()
	read := func(expect int) (trace.Record, *Stream, *int64) {
		s := NewStream(nil)
		s.Expect(expect)
		var first *int64
		if cap(s.evNs) > 0 {
			first = &s.evNs[:1][0]
		}
		var tick int64
		if err := s.ReadBody(strings.NewReader(body), make([]byte, 64), func() int64 { tick++; return tick }); err != nil {
			t.Fatal(err)
		}
		return fill(s), s, first
	}
	want, _, _ := read(0)
	got, s, first := read(n)
	if !reflect.DeepEqual(got, want) || len(got.EventNs) != n {
		t.Fatalf("with Expect(%d): %d events, record differs from the one without: %+v vs %+v", n, len(got.EventNs), got, want)
	}
	if first == nil || &s.evNs[0] != first || cap(s.evNs) < n || cap(s.evCum) < n {
		t.Errorf("the event slices moved or were short (cap %d): Expect reserved no room for %d events", cap(s.evNs), n)
	}
	s.Reset()
	s.Expect(-5)
	s.Expect(1 << 30)
	if c := cap(s.evNs); c < maxExpect || c > 2*maxExpect+n {
		t.Errorf("Expect(1<<30) reserved %d, want about maxExpect (%d)", c, maxExpect)
	}
}
