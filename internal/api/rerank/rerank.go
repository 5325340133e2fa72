// Package rerank is the rerank and score APIs: the parsers of their
// response bodies and the mock's encoders of them. Neither is streamed: a
// recording keeps one event, the body's arrival, with the number of
// results (or scores) and the prompt tokens when the server reports them.
//
// Rerank (POST /v1/rerank, /rerank, /v2/rerank: Jina's and Cohere's
// shape, served by vLLM, SGLang, llama.cpp, TEI): {"id","model",
// "usage":{"prompt_tokens","total_tokens"},"results":[{"index",
// "document","relevance_score"}]} (vLLM); Jina reports only
// usage.total_tokens, Cohere no tokens at all; SGLang and TEI answer with
// a bare array [{"index","score",...}].
//
// Score (POST /v1/score, /score): vLLM's {"id","object":"list","created",
// "model","data":[{"index","object":"score","score"}],"usage"}, SGLang's
// {"scores":[[...],...],"model","usage","object":"scoring"} (one list per
// item).
package rerank

import (
	"strconv"

	"github.com/tracekit/tracekit/internal/api"
	js "github.com/tracekit/tracekit/internal/api/jsonscan"
)

// NewDecoder returns a rerank body parser: it counts "results" (or the
// elements of a bare array).
func NewDecoder() *api.ListDecoder { return api.NewListDecoder("results") }

// NewScoreDecoder returns a score body parser: it counts vLLM's "data" or
// SGLang's "scores".
func NewScoreDecoder() *api.ListDecoder { return api.NewListDecoder("data", "scores") }

// AppendBody appends vLLM's rerank body for scores (result i is document
// i; a real server sorts them by score, which a parser does not need).
func AppendBody(dst []byte, h *api.Head, scores []float64, promptTokens int64) []byte {
	results := make([]Result, len(scores))
	for i, s := range scores {
		results[i] = Result{Index: i, Score: s}
	}
	return AppendResults(dst, h, results, promptTokens)
}

// Result is one rerank result: the document's index in the request, its
// relevance score, and its text when the request asked for documents
// back (nil: no "document" member).
type Result struct {
	Index    int
	Score    float64
	Document *string
}

// AppendResults appends vLLM's rerank body with results in the order
// given (a server sorts them by score, best first, and cuts them at
// top_n).
func AppendResults(dst []byte, h *api.Head, results []Result, promptTokens int64) []byte {
	dst = append(dst, `{"id":"rerank-`...)
	dst = append(js.AppendEscaped(dst, h.ID), `","model":`...)
	dst = js.AppendQuoted(dst, h.Model)
	dst = strconv.AppendInt(append(dst, `,"usage":{"prompt_tokens":`...), promptTokens, 10)
	dst = strconv.AppendInt(append(dst, `,"total_tokens":`...), promptTokens, 10)
	dst = append(dst, `},"results":[`...)
	for i, r := range results {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(append(dst, `{"index":`...), int64(r.Index), 10)
		if r.Document != nil {
			dst = append(js.AppendQuoted(append(dst, `,"document":{"text":`...), *r.Document), '}')
		}
		dst = strconv.AppendFloat(append(dst, `,"relevance_score":`...), r.Score, 'g', -1, 64)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// AppendScoreBody appends vLLM's score body for scores.
func AppendScoreBody(dst []byte, h *api.Head, scores []float64, promptTokens int64) []byte {
	dst = append(dst, `{"id":"score-`...)
	dst = append(js.AppendEscaped(dst, h.ID), `","object":"list","created":`...)
	dst = strconv.AppendInt(dst, h.Created, 10)
	dst = append(js.AppendQuoted(append(dst, `,"model":`...), h.Model), `,"data":[`...)
	for i, s := range scores {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(append(dst, `{"index":`...), int64(i), 10)
		dst = strconv.AppendFloat(append(dst, `,"object":"score","score":`...), s, 'g', -1, 64)
		dst = append(dst, '}')
	}
	dst = strconv.AppendInt(append(dst, `],"usage":{"prompt_tokens":`...), promptTokens, 10)
	dst = strconv.AppendInt(append(dst, `,"total_tokens":`...), promptTokens, 10)
	return append(dst, "}}"...)
}
