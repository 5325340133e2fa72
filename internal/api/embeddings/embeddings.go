// Package embeddings is the embeddings API (POST /v1/embeddings; OpenAI's
// shape, which vLLM, SGLang, Ollama and llama.cpp serve): the parser of
// its response body and the mock's encoder of one. It is never streamed:
// a recording keeps one event, the body's arrival, with the number of
// embeddings returned and the prompt tokens.
//
// The body: {"object":"list","data":[{"object":"embedding","index",
// "embedding": [floats] or a base64 string}],"model",
// "usage":{"prompt_tokens","total_tokens"}}. An error body is OpenAI's
// envelope {"error":{"message","type","param","code"}} or vLLM's older
// {"object":"error","message",...}.
package embeddings

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// NewDecoder returns an embeddings body parser: it counts "data".
func NewDecoder() *api.ListDecoder { return api.NewListDecoder("data") }

// AppendBody appends an embeddings body of n embeddings of dims floats
// each (a fixed pattern: the values mean nothing) and promptTokens of
// usage.
func AppendBody(dst []byte, h *api.Head, n, dims int, promptTokens int64) []byte {
	return appendBody(dst, h, n, dims, promptTokens, false)
}

// AppendBase64Body appends the same body with encoding_format "base64":
// each embedding is the base64 of its float32 values, little-endian, the
// form OpenAI's SDKs ask for by default and decode.
func AppendBase64Body(dst []byte, h *api.Head, n, dims int, promptTokens int64) []byte {
	return appendBody(dst, h, n, dims, promptTokens, true)
}

// value is element j of embedding k.
func value(k, j, dims int) float64 { return float64((k*dims+j)%17)/17 - 0.5 }

func appendBody(dst []byte, h *api.Head, n, dims int, promptTokens int64, b64 bool) []byte {
	dst = append(dst, `{"id":"embd-`...)
	dst = append(js.AppendEscaped(dst, h.ID), `","object":"list","created":`...)
	dst = strconv.AppendInt(dst, h.Created, 10)
	dst = append(js.AppendQuoted(append(dst, `,"model":`...), h.Model), `,"data":[`...)
	var raw []byte
	for k := range n {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(append(dst, `{"object":"embedding","index":`...), int64(k), 10)
		if b64 {
			raw = raw[:0]
			for j := range dims {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(value(k, j, dims))))
			}
			dst = append(base64.StdEncoding.AppendEncode(append(dst, `,"embedding":"`...), raw), `"}`...)
			continue
		}
		dst = append(dst, `,"embedding":[`...)
		for j := range dims {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendFloat(dst, value(k, j, dims), 'f', 6, 64)
		}
		dst = append(dst, "]}"...)
	}
	dst = strconv.AppendInt(append(dst, `],"usage":{"prompt_tokens":`...), promptTokens, 10)
	dst = strconv.AppendInt(append(dst, `,"total_tokens":`...), promptTokens, 10)
	return append(dst, "}}"...)
}
