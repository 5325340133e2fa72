package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/chatmsg"
	"github.com/tracekit/tracekit/internal/jsonpos"
	"github.com/tracekit/tracekit/trace"
)

// otelSpan is one span of either input format, decoded.
type otelSpan struct {
	file                      string
	traceID, spanID, parentID string
	name                      string
	start, end                int64 // unix ns
	attrs, resource           map[string]any
	input                     []trace.Message // gen_ai.input.messages; nil when absent
	tools                     string          // gen_ai.request tools definitions, JSON text
	output                    []trace.Message // the output's assistant message(s)
}

// llmOperations are the gen_ai.operation.name values of model calls.
var llmOperations = map[string]bool{"chat": true, "text_completion": true, "generate_content": true}

func (sp *otelSpan) isLLM() bool {
	op, _ := sp.attrs["gen_ai.operation.name"].(string)
	_, hasInput := sp.attrs["gen_ai.input.messages"]
	return llmOperations[op] || hasInput
}

// conversationKey is the span's session id attribute, else its trace id.
func (sp *otelSpan) conversationKey() string {
	for _, attrs := range []map[string]any{sp.attrs, sp.resource} {
		for _, k := range []string{"gen_ai.conversation.id", "session.id"} {
			if v, ok := attrs[k].(string); ok && v != "" {
				return v
			}
		}
		var keys []string
		for k := range attrs {
			if strings.HasSuffix(k, "session.id") || strings.HasSuffix(k, "session_id") {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			// deterministic among several
			best := keys[0]
			for _, k := range keys[1:] {
				best = min(best, k)
			}
			if v := attrString(attrs[best]); v != "" {
				return v
			}
		}
	}
	return sp.traceID
}

// answer is the span's output as one assistant message (text parts joined,
// tool calls gathered); false when the span has no output.
func (sp *otelSpan) answer() (trace.Message, bool) {
	if len(sp.output) == 0 {
		return trace.Message{}, false
	}
	if len(sp.output) == 1 {
		return sp.output[0], true
	}
	m := trace.Message{Role: "assistant"}
	var texts []string
	for _, o := range sp.output {
		if o.Content != "" {
			texts = append(texts, o.Content)
		}
		m.ToolCalls = append(m.ToolCalls, o.ToolCalls...)
	}
	m.Content = strings.Join(texts, "")
	return m, true
}

// outputUsage is the span's reported output token count.
func (sp *otelSpan) outputUsage() (int, bool) {
	for _, k := range []string{"gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"} {
		switch v := sp.attrs[k].(type) {
		case int64:
			if v >= 0 && v <= maxTokens {
				return int(v), true
			}
		case float64:
			if v >= 0 && v <= maxTokens && v == math.Trunc(v) {
				return int(v), true
			}
		}
	}
	return 0, false
}

func attrString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// parseOTelFile decodes every span of one file: JSON values one after
// another (one object, or JSON Lines), each a span list, an OTLP export
// or a bare array of span-list spans.
func parseOTelFile(path string, b []byte) ([]*otelSpan, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var spans []*otelSpan
	for {
		var raw json.RawMessage
		off := dec.InputOffset()
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			f := jsonFaultOf(err)
			return nil, f.rowError(path, b, 1, f.off, "")
		}
		got, err := parseOTelValue(path, raw)
		if err != nil {
			l, _ := jsonpos.LineCol(b, off)
			return nil, fmt.Errorf("%s (value starting on line %d): %w", path, l, err)
		}
		spans = append(spans, got...)
	}
	if len(spans) == 0 {
		return nil, errSpan(path, "", errNoSpans)
	}
	seen := map[[2]string]bool{}
	for _, sp := range spans {
		key := [2]string{sp.traceID, sp.spanID}
		if sp.spanID != "" && seen[key] {
			return nil, errSpan(path, sp.spanID, fmt.Errorf("span id appears twice in trace %q", sp.traceID))
		}
		seen[key] = true
		sp.file = path
		if err := sp.decodeGenAI(); err != nil {
			return nil, errSpan(path, sp.spanID, err)
		}
	}
	return spans, nil
}

// parseOTelValue tells the format of one top-level JSON value.
func parseOTelValue(path string, raw json.RawMessage) ([]*otelSpan, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var list []listSpan
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("a span list: %w", err)
		}
		return listSpans(path, "", list)
	}
	var top struct {
		TraceID       string             `json:"trace_id"`
		Spans         []listSpan         `json:"spans"`
		ResourceSpans []otlpResourceSpan `json:"resourceSpans"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	switch {
	case top.ResourceSpans != nil:
		return otlpSpans(path, top.ResourceSpans)
	case top.Spans != nil:
		return listSpans(path, top.TraceID, top.Spans)
	}
	return nil, errNoSpans
}

// listSpan is a span of a span-list file.
type listSpan struct {
	TraceID   string                     `json:"trace_id"`
	SpanID    string                     `json:"span_id"`
	ParentID  *string                    `json:"parent_span_id"`
	Name      string                     `json:"name"`
	StartTime json.RawMessage            `json:"start_time"`
	EndTime   json.RawMessage            `json:"end_time"`
	Attrs     map[string]json.RawMessage `json:"attributes"`
	Resource  map[string]json.RawMessage `json:"resource_attributes"`
}

func listSpans(path, traceID string, list []listSpan) ([]*otelSpan, error) {
	out := make([]*otelSpan, 0, len(list))
	for i, l := range list {
		sp := &otelSpan{traceID: l.TraceID, spanID: l.SpanID, name: l.Name}
		if sp.traceID == "" {
			sp.traceID = traceID
		}
		name := l.SpanID
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		if l.ParentID != nil {
			sp.parentID = *l.ParentID
		}
		var err error
		if sp.start, err = parseSpanTime(l.StartTime); err != nil {
			return nil, errSpan(path, name, fmt.Errorf("start_time: %w", err))
		}
		if sp.end, err = parseSpanTime(l.EndTime); err != nil {
			return nil, errSpan(path, name, fmt.Errorf("end_time: %w", err))
		}
		if sp.end < sp.start {
			return nil, errSpan(path, name, fmt.Errorf("end_time is before start_time"))
		}
		if sp.attrs, err = plainAttrs(l.Attrs); err != nil {
			return nil, errSpan(path, name, err)
		}
		if sp.resource, err = plainAttrs(l.Resource); err != nil {
			return nil, errSpan(path, name, fmt.Errorf("resource_attributes: %w", err))
		}
		if sp.spanID == "" {
			sp.spanID = name
		}
		out = append(out, sp)
	}
	return out, nil
}

// parseSpanTime reads an ISO 8601 time (no zone means UTC) or a number of
// unix nanoseconds.
func parseSpanTime(raw json.RawMessage) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err == nil {
			if v, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
				return v, nil
			}
		}
		return 0, fmt.Errorf("want an ISO 8601 time, found %s", truncate(string(raw), 40))
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixNano(), nil
		}
	}
	return 0, fmt.Errorf("want an ISO 8601 time (2006-01-02T15:04:05.000000, optional zone), found %q", s)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// plainAttrs decodes span-list attributes: strings, numbers, booleans.
func plainAttrs(raw map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		switch x := x.(type) {
		case json.Number:
			if i, err := x.Int64(); err == nil {
				out[k] = i
			} else if f, err := x.Float64(); err == nil {
				out[k] = f
			}
		case string, bool:
			out[k] = x
		case nil:
		default:
			// arrays and objects (message lists written unencoded) are
			// kept as their JSON text
			out[k] = string(v)
		}
	}
	return out, nil
}

// OTLP JSON (the protobuf JSON mapping: camelCase names, 64-bit integers
// as strings).
type otlpResourceSpan struct {
	Resource struct {
		Attributes []otlpKV `json:"attributes"`
	} `json:"resource"`
	ScopeSpans []struct {
		Spans []otlpSpan `json:"spans"`
	} `json:"scopeSpans"`
}

type otlpSpan struct {
	TraceID      string          `json:"traceId"`
	SpanID       string          `json:"spanId"`
	ParentSpanID string          `json:"parentSpanId"`
	Name         string          `json:"name"`
	Start        json.RawMessage `json:"startTimeUnixNano"`
	End          json.RawMessage `json:"endTimeUnixNano"`
	Attributes   []otlpKV        `json:"attributes"`
}

type otlpKV struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpValue struct {
	StringValue *string         `json:"stringValue"`
	IntValue    json.RawMessage `json:"intValue"`
	DoubleValue *float64        `json:"doubleValue"`
	BoolValue   *bool           `json:"boolValue"`
	ArrayValue  *struct {
		Values []otlpValue `json:"values"`
	} `json:"arrayValue"`
}

// plain is the value as span-list attributes hold it; arrays become their
// JSON text.
func (v otlpValue) plain() (any, error) {
	switch {
	case v.StringValue != nil:
		return *v.StringValue, nil
	case v.IntValue != nil:
		s := strings.Trim(string(v.IntValue), `"`)
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("intValue %s is not an integer", v.IntValue)
		}
		return i, nil
	case v.DoubleValue != nil:
		return *v.DoubleValue, nil
	case v.BoolValue != nil:
		return *v.BoolValue, nil
	case v.ArrayValue != nil:
		var xs []any
		for _, e := range v.ArrayValue.Values {
			x, err := e.plain()
			if err != nil {
				return nil, err
			}
			xs = append(xs, x)
		}
		b, _ := json.Marshal(xs)
		return string(b), nil
	}
	return nil, nil
}

func otlpAttrs(kvs []otlpKV) (map[string]any, error) {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v, err := kv.Value.plain()
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", kv.Key, err)
		}
		if v != nil {
			out[kv.Key] = v
		}
	}
	return out, nil
}

func otlpSpans(path string, rs []otlpResourceSpan) ([]*otelSpan, error) {
	var out []*otelSpan
	for _, r := range rs {
		res, err := otlpAttrs(r.Resource.Attributes)
		if err != nil {
			return nil, errSpan(path, "", fmt.Errorf("resource: %w", err))
		}
		for _, ss := range r.ScopeSpans {
			for _, o := range ss.Spans {
				sp := &otelSpan{traceID: o.TraceID, spanID: o.SpanID, parentID: o.ParentSpanID, name: o.Name, resource: res}
				if o.SpanID == "" {
					return nil, errSpan(path, "", fmt.Errorf("a span of trace %q has no spanId", o.TraceID))
				}
				if sp.start, err = unixNano(o.Start); err != nil {
					return nil, errSpan(path, o.SpanID, fmt.Errorf("startTimeUnixNano: %w", err))
				}
				if sp.end, err = unixNano(o.End); err != nil {
					return nil, errSpan(path, o.SpanID, fmt.Errorf("endTimeUnixNano: %w", err))
				}
				if sp.end < sp.start {
					return nil, errSpan(path, o.SpanID, fmt.Errorf("endTimeUnixNano is before startTimeUnixNano"))
				}
				if sp.attrs, err = otlpAttrs(o.Attributes); err != nil {
					return nil, errSpan(path, o.SpanID, err)
				}
				out = append(out, sp)
			}
		}
	}
	return out, nil
}

// unixNano reads a fixed64 of the OTLP JSON mapping: a decimal string (or
// a number).
func unixNano(raw json.RawMessage) (int64, error) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	if s == "" || s == "null" {
		return 0, errors.New("missing")
	}
	v, err := strconv.ParseUint(s, 10, 63)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("want unix nanoseconds, found %s", truncate(string(raw), 40))
	}
	return int64(v), nil
}

// decodeGenAI reads the span's messages, output and tools from its
// attributes.
func (sp *otelSpan) decodeGenAI() error {
	if v, ok := sp.attrs["gen_ai.input.messages"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return fmt.Errorf("attribute gen_ai.input.messages: want a JSON string of messages")
		}
		msgs, err := decodeGenAIMessages(s)
		if err != nil {
			return fmt.Errorf("attribute gen_ai.input.messages: %w", err)
		}
		if msgs == nil {
			msgs = []trace.Message{}
		}
		sp.input = msgs
	}
	if v, ok := sp.attrs["gen_ai.output.messages"]; ok {
		s, _ := v.(string)
		msgs, err := decodeGenAIMessages(s)
		if err != nil {
			return fmt.Errorf("attribute gen_ai.output.messages: %w", err)
		}
		for _, m := range msgs {
			if m.Role == "assistant" || m.Role == "" {
				m.Role = "assistant"
				sp.output = append(sp.output, m)
			}
		}
	} else if v, ok := sp.attrs["gen_ai.output.text"]; ok {
		sp.output = []trace.Message{{Role: "assistant", Content: attrString(v)}}
	}
	for _, k := range []string{"gen_ai.tool.definitions", "gen_ai.request.tools"} {
		if v, ok := sp.attrs[k].(string); ok && v != "" {
			if !json.Valid([]byte(v)) {
				return fmt.Errorf("attribute %s: not JSON", k)
			}
			var c bytes.Buffer
			json.Compact(&c, []byte(v))
			sp.tools = c.String()
			break
		}
	}
	return nil
}

// genAIMessage is a message in either shape: OpenAI's (content, tool_calls,
// tool_call_id: chatmsg's) or the GenAI semantic conventions' parts.
type genAIMessage struct {
	chatmsg.Message
	Parts []genAIPart `json:"parts"`
}

type genAIPart struct {
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Response  json.RawMessage `json:"response"`
	Result    json.RawMessage `json:"result"`
}

// decodeGenAIMessages reads a JSON array of messages (a JSON object
// {"messages": [...]} too).
func decodeGenAIMessages(s string) ([]trace.Message, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var raw []genAIMessage
	if strings.HasPrefix(s, "{") {
		var w struct {
			Messages []genAIMessage `json:"messages"`
		}
		if err := json.Unmarshal([]byte(s), &w); err != nil {
			return nil, fmt.Errorf("not a JSON message list: %w", err)
		}
		raw = w.Messages
	} else if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("not a JSON message list: %w", err)
	}
	out := make([]trace.Message, 0, len(raw))
	for i := range raw {
		r := &raw[i]
		if r.Role == "" {
			return nil, fmt.Errorf("message %d has no role", i)
		}
		m, err := r.Decode()
		if err != nil {
			return nil, fmt.Errorf("message %d: content: %w", i, err)
		}
		for _, p := range r.Parts {
			switch p.Type {
			case "text", "":
				t := p.Text
				if t == "" {
					t, _ = chatmsg.ContentText(p.Content)
				}
				m.Content += t
			case "tool_call":
				m.ToolCalls = append(m.ToolCalls, trace.ToolCall{ID: p.ID, Name: p.Name, Arguments: chatmsg.ArgumentsText(p.Arguments)})
			case "tool_call_response":
				m.ToolCallID = p.ID
				r := p.Response
				if r == nil {
					r = p.Result
				}
				m.Content += chatmsg.ArgumentsText(r)
				if m.Role != "tool" {
					m.Role = "tool"
				}
			}
		}
		out = append(out, m)
	}
	return out, nil
}
