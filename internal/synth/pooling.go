package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/tracekit/tracekit/trace"
)

// PoolingOptions configure a Pooling source: requests to an API that
// answers one body of vectors or scores (embeddings, rerank, score).
type PoolingOptions struct {
	// Endpoint is trace.EndpointEmbeddings, EndpointRerank or EndpointScore.
	Endpoint string
	Corpus   *Corpus
	Count    int // requests, >= 1
	// Embeddings: inputs per request and tokens per input.
	BatchSize, InputTokens Dist
	// Rerank and score: documents per query, tokens of the query and of
	// each document.
	Documents, QueryTokens, DocumentTokens Dist
	Seed                                   int64
	MaxBytes                               int64
}

// Pooling makes single requests for the non-generating APIs, each a
// conversation of one turn (id "req-<i>", zero-padded) with the turn's
// Endpoint set:
//   - embeddings: BatchSize messages of role trace.RoleInput, each of
//     InputTokens tokens (drawn per input);
//   - rerank, score: one trace.RoleQuery message of QueryTokens tokens and
//     Documents messages of role trace.RoleDocument of DocumentTokens
//     tokens each (drawn per document).
//
// Text is cut from the corpus at random places with exact token counts
// (Tokens); InputTokens is their sum, OutputTokens 0 (nothing is
// generated). Request i draws from its own generator seeded by (Seed, i),
// so it does not change when Count grows. Start offsets are left for a
// Schedule.
type Pooling struct {
	Opts PoolingOptions
}

var _ Source = (*Pooling)(nil)

// NewPooling checks o and returns the source.
func NewPooling(o PoolingOptions) (*Pooling, error) {
	const st = "PoolingOptions"
	switch {
	case o.Endpoint != trace.EndpointEmbeddings && o.Endpoint != trace.EndpointRerank && o.Endpoint != trace.EndpointScore:
		return nil, fieldErr(st, "Endpoint", "%q, want %s, %s or %s", o.Endpoint, trace.EndpointEmbeddings, trace.EndpointRerank, trace.EndpointScore)
	case o.Corpus == nil:
		return nil, fieldErr(st, "Corpus", "no corpus")
	case o.Count < 1:
		return nil, fieldErr(st, "Count", "%d requests, want at least 1", o.Count)
	}
	s := &Pooling{Opts: o}
	type check struct {
		field string
		d     Dist
	}
	checks := []check{{"Documents", o.Documents}, {"QueryTokens", o.QueryTokens}, {"DocumentTokens", o.DocumentTokens}}
	if s.embeddings() {
		checks = []check{{"BatchSize", o.BatchSize}, {"InputTokens", o.InputTokens}}
	}
	for _, c := range checks {
		if err := checkCount(st, c.field, c.d, 1); err != nil {
			return nil, err
		}
	}
	var est float64
	what := ""
	if s.embeddings() {
		est = max(distMean(o.BatchSize), 1) * max(distMean(o.InputTokens), 1)
		what = fmt.Sprintf("%d requests x %.3g inputs x %.4g tokens", o.Count, distMean(o.BatchSize), distMean(o.InputTokens))
	} else {
		est = max(distMean(o.QueryTokens), 1) + max(distMean(o.Documents), 1)*max(distMean(o.DocumentTokens), 1)
		what = fmt.Sprintf("%d requests x (%.4g query + %.3g documents x %.4g tokens)", o.Count,
			distMean(o.QueryTokens), distMean(o.Documents), distMean(o.DocumentTokens))
	}
	if err := checkSize(st, float64(o.Count)*est*o.Corpus.BytesPerToken(), o.MaxBytes, what); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Pooling) embeddings() bool { return s.Opts.Endpoint == trace.EndpointEmbeddings }

// Name is "synthetic": the same corpus text as the conversations, shaped
// for another API.
func (s *Pooling) Name() string { return "synthetic" }

func (s *Pooling) Conversations(ctx context.Context) ([]Conversation, error) {
	o := s.Opts
	c := o.Corpus
	width := len(strconv.Itoa(o.Count - 1))
	convs := make([]Conversation, o.Count)
	for i := range convs {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r := rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)^0x9e3779b97f4a7c15))
		item := func(role string, d Dist) trace.Message {
			n := max(sampleInt(d, r), 1)
			return trace.Message{Role: role, Content: c.Text(r.IntN(c.Tokens()), n), Tokens: int32(n)}
		}
		var msgs []trace.Message
		if s.embeddings() {
			n := max(sampleInt(o.BatchSize, r), 1)
			msgs = make([]trace.Message, 0, n)
			for range n {
				msgs = append(msgs, item(trace.RoleInput, o.InputTokens))
			}
		} else {
			n := max(sampleInt(o.Documents, r), 1)
			msgs = make([]trace.Message, 0, n+1)
			msgs = append(msgs, item(trace.RoleQuery, o.QueryTokens))
			for range n {
				msgs = append(msgs, item(trace.RoleDocument, o.DocumentTokens))
			}
		}
		var in int64
		for _, m := range msgs {
			in += int64(m.Tokens)
		}
		if in > math.MaxInt32 {
			return nil, fieldErr("PoolingOptions", "InputTokens", "request %d holds %d tokens, above the %d a trace stores", i, in, maxTokens)
		}
		convs[i] = Conversation{{
			ConversationID: fmt.Sprintf("req-%0*d", width, i),
			Messages:       msgs,
			InputTokens:    int32(in),
			Endpoint:       o.Endpoint,
		}}
	}
	return convs, nil
}

// Defaults of the pooling requests' shapes: one input per embeddings
// request; rerank and score a short query over ten passages.
const (
	DefaultBatchSize      = "1"
	DefaultDocuments      = "10"
	DefaultQueryTokens    = "32"
	DefaultDocumentTokens = "256"
)
