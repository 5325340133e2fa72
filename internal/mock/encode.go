package mock

import (
	"encoding/json"
	"strconv"
	"time"
)

// The encoding of responses: the generated text and the stream's chunks,
// appended into reused buffers (no allocation per event).

// appendText appends the generated text of tokens [from, to); the end-of-text
// token of a "stop" finish has none.
func (x *exchange) appendText(b []byte, from, to int) []byte {
	textTokens := int(x.e.CompletionTokens)
	if x.e.FinishReason == "stop" {
		textTokens--
	}
	for i := from; i < min(to, textTokens); i++ {
		b = append(b, ' ')
		b = append(b, word(x.s.cfg.Seed, x.p.hash, i)...)
	}
	return b
}

// jsonString appends s as a JSON string.
func jsonString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// buildHeads prepares the constant part of every chunk of this stream.
func (x *exchange) buildHeads() {
	id, object := "cmpl-"+x.e.RequestID, "text_completion"
	if x.chat {
		id, object = "chatcmpl-"+x.e.RequestID, "chat.completion.chunk"
	}
	h := append([]byte(nil), `data: {"id":`...)
	h = jsonString(h, id)
	h = append(h, `,"object":"`+object+`","created":`...)
	h = strconv.AppendInt(h, time.Now().Unix(), 10)
	h = append(h, `,"model":`...)
	h = jsonString(h, x.e.Model)
	x.usageHead = append(append([]byte(nil), h...), `,"choices":[],"usage":`...)
	x.head = append(h, `,"choices":[{"index":0,`...)
	x.buf = make([]byte, 0, 512)
}

// appendUsage appends the usage object with completion tokens so far.
func (x *exchange) appendUsage(b []byte, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(x.p.tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(x.p.tokens+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(x.e.CachedTokens), 10)
	return append(b, "}}"...)
}

// appendEvent encodes the chunk carrying tokens [from, to); role marks the
// chat role-only chunk.
func (x *exchange) appendEvent(b []byte, from, to int, role bool) []byte {
	b = append(b, x.head...)
	last := to == int(x.e.CompletionTokens) && !role
	if x.chat {
		if role {
			b = append(b, `"delta":{"role":"assistant","content":""}`...)
		} else if len(x.toolNames) > 0 {
			b = x.appendToolDelta(b, from, to)
		} else {
			b = append(b, `"delta":{"content":"`...)
			b = append(x.appendText(b, from, to), `"}`...)
		}
	} else {
		b = append(b, `"text":"`...)
		b = append(x.appendText(b, from, to), '"')
	}
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if last {
		b = append(append(append(b, '"'), x.e.FinishReason...), '"')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"stop_reason":null}]`...)
	if so := x.req.StreamOptions; so != nil && so.ContinuousUsageStats {
		b = x.appendUsage(append(b, `,"usage":`...), to)
	} else if so != nil && so.IncludeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}
