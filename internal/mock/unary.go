package mock

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/tracekit/tracekit/internal/clock"
)

// unary answers a non-streaming request (or a stream=true one under the
// json fault) with one body after the whole generation time.
func (x *exchange) unary() {
	if !x.admit() {
		x.interrupted()
		return
	}
	first := x.prefill()
	if !x.sleepUntil(first) {
		x.interrupted()
		return
	}
	x.s.m.ttft.observe(x.e.PlannedTTFTNs) // no event shows it: the model's time
	x.s.cache.insert(x.p.segs)
	end := first
	for range int(x.e.CompletionTokens) - 1 {
		end += int64(x.s.cfg.Latency.itl(x.rng, int(x.s.m.running.Load())))
	}
	if x.eff.stallAt >= 0 {
		end += int64(x.eff.stallFor) // the body comes after every event a stall could delay
	}
	if !x.sleepUntil(end) {
		x.interrupted()
		return
	}
	x.s.m.genTokens.Add(int64(x.e.CompletionTokens))
	x.holdKV(int(x.e.CompletionTokens))
	if x.eff.disconnectAt >= 0 {
		x.finish(OutcomeFault)
		x.abort(false)
		return
	}
	var text string
	if len(x.toolNames) == 0 {
		text = string(x.appendText(nil, 0, int(x.e.CompletionTokens)))
	}
	x.cacheAnswer()
	body := x.unaryBody(text)
	if x.eff.malformedAt >= 0 {
		body = body[:len(body)/2]
	}
	if x.eff.gzip {
		body = gzipBytes(body)
		x.w.Header().Set("Content-Encoding", "gzip")
	}
	x.e.Status = http.StatusOK
	x.e.HeadersMonoNs = clock.Mono()
	x.finish(x.eff.logOutcome())
	x.w.Header().Set("Content-Type", "application/json")
	x.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	x.w.Write(body)
}

// unaryMessage is a non-streaming chat answer's message: the text, or
// content null and the tool calls.
func (x *exchange) unaryMessage(text string) map[string]any {
	if len(x.toolNames) > 0 {
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": x.unaryToolCalls()}
	}
	return map[string]any{"role": "assistant", "content": text, "tool_calls": []any{}}
}

func (x *exchange) usage() map[string]any {
	c := int(x.e.CompletionTokens)
	return map[string]any{
		"prompt_tokens": x.p.tokens, "completion_tokens": c, "total_tokens": x.p.tokens + c,
		"prompt_tokens_details": map[string]any{"cached_tokens": x.e.CachedTokens},
	}
}

func (x *exchange) unaryBody(text string) []byte {
	created := time.Now().Unix()
	var v map[string]any
	if x.chat {
		v = map[string]any{
			"id": "chatcmpl-" + x.e.RequestID, "object": "chat.completion", "created": created, "model": x.e.Model,
			"choices": []any{map[string]any{
				"index": 0, "message": x.unaryMessage(text),
				"logprobs": nil, "finish_reason": x.e.FinishReason, "stop_reason": nil,
			}},
			"usage": x.usage(), "prompt_logprobs": nil,
		}
	} else {
		v = map[string]any{
			"id": "cmpl-" + x.e.RequestID, "object": "text_completion", "created": created, "model": x.e.Model,
			"choices": []any{map[string]any{
				"index": 0, "text": text, "logprobs": nil, "finish_reason": x.e.FinishReason, "stop_reason": nil,
			}},
			"usage": x.usage(),
		}
	}
	b, _ := json.Marshal(v)
	return b
}

// gzipBytes compresses a whole body.
func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}
