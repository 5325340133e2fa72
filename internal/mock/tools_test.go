package mock

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

var testTools = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "search", "parameters": map[string]any{"type": "object"}}},
	{"type": "function", "function": map[string]any{"name": "fetch", "parameters": map[string]any{"type": "object"}}},
}

func toolBody(stream bool, choice any) map[string]any {
	b := chatBody(9, stream, "user", "find it")
	b["tools"] = testTools
	if choice != nil {
		b["tool_choice"] = choice
	}
	return b
}

// parseAnswer reads a response through tracekit's own parser.
func parseAnswer(t *testing.T, body io.Reader, stream bool) (*record.Stream, trace.Record) {
	t.Helper()
	s := record.NewStream(nil)
	var err error
	if stream {
		err = s.ReadBody(body, make([]byte, 4<<10), func() int64 { return 1 })
	} else {
		var b []byte
		if b, err = io.ReadAll(body); err == nil {
			s.FeedJSON(b, 1)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if k, msg := s.Verdict(); k != trace.ErrNone {
		t.Fatalf("%s: %s", k, msg)
	}
	var rec trace.Record
	s.Fill(&rec)
	return s, rec
}

// tool_choice "required", a named function or the header make the answer
// tool calls, streamed as vLLM does (id and name first, arguments in
// fragments, finish_reason tool_calls) or whole without streaming; the
// planned output is their argument tokens, usage counts them, the log
// says how many calls went out.
func TestToolCallAnswers(t *testing.T) {
	srv := startMock(t, nil)
	for _, c := range []struct {
		name   string
		choice any
		header string
		names  string
		want   []string
	}{
		{"required", "required", "", "", []string{"search"}},
		{"named", map[string]any{"type": "function", "function": map[string]any{"name": "fetch"}}, "", "", []string{"fetch"}},
		{"header", "auto", "3", "", []string{"search", "fetch", "search"}},
		{"auto", "auto", "", "", nil},
		{"none", nil, "", "", nil},
		// the hints replay's --mock-hints sends: the recorded names and count
		{"names", "auto", "", "fetch, fetch,lookup", []string{"fetch", "fetch", "lookup"}},
		{"names-count", "required", "2", "lookup,search", []string{"lookup", "search"}},
		{"zero", "required", "0", "", nil},
	} {
		for _, stream := range []bool{true, false} {
			id := c.name + map[bool]string{true: "-s", false: "-j"}[stream]
			hdr := map[string]string{"X-Request-Id": id}
			if c.header != "" {
				hdr[ToolCallsHeader] = c.header
			}
			if c.names != "" {
				hdr[ToolNamesHeader] = c.names
			}
			resp := post(t, srv, "/v1/chat/completions", toolBody(stream, c.choice), hdr)
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("%s: HTTP %d %s", id, resp.StatusCode, b)
			}
			s, rec := parseAnswer(t, resp.Body, stream)
			calls := s.AppendToolCalls(nil)
			e := entryByID(t, srv, id)
			if len(calls) != len(c.want) || int(e.ToolCalls) != len(c.want) {
				t.Fatalf("%s: %d calls, log %d, want %v", id, len(calls), e.ToolCalls, c.want)
			}
			if rec.CompletionTokens != e.CompletionTokens || e.CompletionTokens != 9 {
				t.Fatalf("%s: usage %d, log %d", id, rec.CompletionTokens, e.CompletionTokens)
			}
			if len(c.want) == 0 {
				if s.Text() == "" || s.ToolCallsFinish() {
					t.Fatalf("%s: a content answer expected, got %q", id, s.Text())
				}
				continue
			}
			if !s.ToolCallsFinish() || e.FinishReason != "tool_calls" || s.Text() != "" {
				t.Fatalf("%s: finish %v/%q, text %q", id, s.ToolCallsFinish(), e.FinishReason, s.Text())
			}
			words := 0
			for k, call := range calls {
				var args struct{ Text string }
				if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil || args.Text == "" {
					t.Fatalf("%s: call %d arguments %q: %v", id, k, call.Arguments, err)
				}
				words += len(strings.Fields(args.Text))
				if call.Name != c.want[k] || call.ID != "chatcmpl-tool-"+id+"-"+string(rune('0'+k)) {
					t.Fatalf("%s: call %d %+v, want name %s", id, k, call, c.want[k])
				}
			}
			if words != 9 {
				t.Fatalf("%s: %d argument words, want the 9 planned tokens", id, words)
			}
			if stream && len(rec.EventNs) != len(e.EventMonoNs) {
				t.Fatalf("%s: parser listed %d events, the mock logged %d", id, len(rec.EventNs), len(e.EventMonoNs))
			}
		}
	}
}

// tool_choice without tools, a bad tool_choice and a bad header are
// vLLM-style 400s.
func TestToolCallBadRequests(t *testing.T) {
	srv := startMock(t, nil)
	b := chatBody(4, true, "user", "x")
	b["tool_choice"] = "required"
	if r := post(t, srv, "/v1/chat/completions", b, nil); r.StatusCode != 400 {
		t.Errorf("required without tools: HTTP %d", r.StatusCode)
	}
	if r := post(t, srv, "/v1/chat/completions", toolBody(true, "sometimes"), nil); r.StatusCode != 400 {
		t.Errorf("bad tool_choice: HTTP %d", r.StatusCode)
	}
	for _, h := range []map[string]string{{ToolCallsHeader: "-1"}, {ToolCallsHeader: "65"}, {ToolNamesHeader: "a,,b"},
		{ToolCallsHeader: "1", ToolNamesHeader: "a,b"}} {
		if r := post(t, srv, "/v1/chat/completions", toolBody(true, nil), h); r.StatusCode != 400 {
			t.Errorf("headers %v: HTTP %d", h, r.StatusCode)
		}
	}
}
