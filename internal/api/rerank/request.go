package rerank

import (
	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/trace"
)

// AppendRequest appends a /v1/rerank request body: the turn's query
// message (trace.RoleQuery) and its documents (trace.RoleDocument), in
// order.
func AppendRequest(dst []byte, r *api.Request, msgs []trace.Message) []byte {
	return appendPair(dst, r, msgs, `,"query":`, `,"documents":[`)
}

// AppendScoreRequest appends a /v1/score request body: text_1 the query,
// text_2 the documents.
func AppendScoreRequest(dst []byte, r *api.Request, msgs []trace.Message) []byte {
	return appendPair(dst, r, msgs, `,"text_1":`, `,"text_2":[`)
}

func appendPair(dst []byte, r *api.Request, msgs []trace.Message, query, docs string) []byte {
	dst = append(dst, `{"model":`...)
	dst = api.AppendString(dst, r.Model)
	for i := range msgs {
		if msgs[i].Role == trace.RoleQuery {
			dst = append(dst, query...)
			dst = api.AppendString(dst, msgs[i].Content)
			break
		}
	}
	dst = append(dst, docs...)
	n := 0
	for i := range msgs {
		if msgs[i].Role != trace.RoleDocument {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = api.AppendString(dst, msgs[i].Content)
	}
	dst = append(dst, ']')
	dst = r.AppendExtra(dst)
	return append(dst, '}')
}
