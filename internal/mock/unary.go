package mock

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/embeddings"
	"github.com/tracekit/tracekit/internal/api/rerank"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/fnv1a"
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
		end += int64(x.lat.itl(x.rng, int(x.s.m.running.Load())))
	}
	x.buildHead()
	x.body(end, func() {
		x.s.m.genTokens.Add(int64(x.e.CompletionTokens))
		x.holdKV(int(x.e.CompletionTokens))
	}, func() []byte {
		x.cacheAnswer()
		return x.enc.Body(nil, &x.head, x.answer())
	})
}

// body waits until end (later by a stall), calls done, then sends the
// body body makes, or what the request's fault does instead: a
// disconnect, a 500 error body (the error fault), half the body
// (malformed), a gzipped one.
func (x *exchange) body(end int64, done func(), body func() []byte) {
	if x.eff.stallAt >= 0 {
		end += int64(x.eff.stallFor) // the body comes after every event a stall could delay
	}
	if !x.sleepUntil(end) {
		x.interrupted()
		return
	}
	if done != nil {
		done()
	}
	if x.eff.disconnectAt >= 0 {
		x.finish(OutcomeFault)
		x.abort(false)
		return
	}
	if x.eff.errorAt >= 0 {
		x.e.Status = http.StatusInternalServerError
		x.finish(OutcomeFault)
		x.writeError(http.StatusInternalServerError, "injected fault "+x.fault.String(), "")
		return
	}
	b := body()
	if x.eff.malformedAt >= 0 {
		b = b[:len(b)/2]
	}
	if x.eff.gzip {
		b = gzipBytes(b)
		x.w.Header().Set("Content-Encoding", "gzip")
	}
	x.e.Status = http.StatusOK
	x.e.HeadersMonoNs = clock.Mono()
	x.finish(x.eff.logOutcome())
	x.w.Header().Set("Content-Type", "application/json")
	x.w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	x.w.Write(b)
}

// poolAnswer answers an embeddings, rerank or score request: it holds a
// batch slot for the prefill of every sequence it computes
// (PrefillBase + PrefillPerToken x input tokens; no prefix cache), then
// sends one body.
func (x *exchange) poolAnswer() {
	if !x.admit() {
		x.interrupted()
		return
	}
	s := x.s
	s.m.promptTokens.Add(int64(x.p.tokens))
	end := x.e.AdmitMonoNs + int64(x.lat.prefill(x.p.tokens))
	x.e.PlannedTTFTNs = end - x.e.ArrivalMonoNs
	x.body(end, nil, func() []byte {
		p := x.pool
		h := api.Head{ID: x.e.RequestID, Model: x.e.Model, Created: time.Now().Unix()}
		tokens := int64(x.p.tokens)
		switch x.api {
		case api.Embeddings:
			x.e.Items = int32(len(p.seqs))
			if p.base64 {
				return embeddings.AppendBase64Body(nil, &h, len(p.seqs), p.dims, tokens)
			}
			return embeddings.AppendBody(nil, &h, len(p.seqs), p.dims, tokens)
		case api.Rerank:
			results := make([]rerank.Result, len(p.docs))
			for i := range p.docs {
				results[i] = rerank.Result{Index: i, Score: x.score(p.seqs[i])}
				if p.returnDoc {
					results[i].Document = &p.docs[i]
				}
			}
			slices.SortStableFunc(results, func(a, b rerank.Result) int { return -cmpFloat(a.Score, b.Score) })
			if p.topN > 0 && p.topN < len(results) {
				results = results[:p.topN]
			}
			x.e.Items = int32(len(results))
			return rerank.AppendResults(nil, &h, results, tokens)
		}
		scores := make([]float64, len(p.seqs))
		for i, seq := range p.seqs {
			scores[i] = x.score(seq)
		}
		x.e.Items = int32(len(scores))
		return rerank.AppendScoreBody(nil, &h, scores, tokens)
	})
}

// score is the mock's relevance of a sequence (a query and a document):
// a number in [0, 1) fixed by the seed and the text.
func (x *exchange) score(seq string) float64 {
	v := splitmix64(uint64(x.s.cfg.Seed) ^ fnv1a.String(seq))
	return math.Round(float64(v>>11)/(1<<53)*1e6) / 1e6
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// gzipBytes compresses a whole body.
func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}
