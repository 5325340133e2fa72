package rerank_test

import (
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/rerank"
	"github.com/tracekit/tracekit/trace"
)

func TestRerankBodies(t *testing.T) {
	h := api.Head{ID: "r1", Model: "BAAI/bge-reranker-v2-m3", Created: 1}
	u := api.Usage{Prompt: 40, Completion: -1, Cached: -1, Reasoning: -1}
	apitest.Check(t, api.Rerank, rerank.AppendBody(nil, &h, []float64{0.98, 0.0123, 1e-7}, 40), true,
		apitest.Want{Events: 1, Done: true, Items: 3, Usage: u})
	for _, c := range []struct {
		name string
		body string
		want apitest.Want
	}{
		{"vLLM, documents echoed, sorted by score",
			`{"id":"rerank-7a","model":"BAAI/bge-reranker-base","usage":{"total_tokens":56},"results":[{"index":1,"document":{"text":"The capital of France is Paris.","multi_modal":null},"relevance_score":0.99853515625},{"index":0,"document":{"text":"The capital of Brazil is Brasilia."},"relevance_score":0.0005860328674316406}]}`,
			apitest.Want{Events: 1, Done: true, Items: 2, Usage: api.Usage{Prompt: 56, Completion: -1, Cached: -1, Reasoning: -1}}},
		{"Cohere v2: no token counts",
			`{"id":"07734bd2","results":[{"index":3,"relevance_score":0.999071},{"index":4,"relevance_score":0.7867867}],"meta":{"api_version":{"version":"2"},"billed_units":{"search_units":1}}}`,
			apitest.Want{Events: 1, Done: true, Items: 2, Usage: api.NoUsage}},
		{"TEI and SGLang: a bare array",
			`[{"index":0,"score":0.9},{"index":2,"score":0.1},{"index":1,"score":0.05}]`,
			apitest.Want{Events: 1, Done: true, Items: 3, Usage: api.NoUsage}},
		{"an error body",
			`{"error":{"message":"rerank is not supported by this model","type":"BadRequestError","code":400}}`,
			apitest.Want{Kind: trace.ErrMalformed, MsgHas: "(BadRequestError) rerank is not supported", Usage: api.NoUsage}},
		{"a Messages answer",
			`{"id":"msg_1","type":"message","role":"assistant","content":[]}`,
			apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a messages answer where rerank was asked for", Usage: api.NoUsage}},
	} {
		t.Run(c.name, func(t *testing.T) { apitest.Check(t, api.Rerank, []byte(c.body), true, c.want) })
	}
}

// Results go in the order given, with their documents when given, as
// vLLM's body has them.
func TestRerankResults(t *testing.T) {
	h := api.Head{ID: "r1", Model: "m", Created: 1}
	doc := `the "capital"`
	body := rerank.AppendResults(nil, &h, []rerank.Result{{Index: 2, Score: 0.9, Document: &doc}, {Index: 0, Score: 0.1}}, 7)
	want := `{"id":"rerank-r1","model":"m","usage":{"prompt_tokens":7,"total_tokens":7},"results":[{"index":2,"document":{"text":"the \"capital\""},"relevance_score":0.9},{"index":0,"relevance_score":0.1}]}`
	if string(body) != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	apitest.Check(t, api.Rerank, body, true, apitest.Want{Events: 1, Done: true, Items: 2, Usage: api.Usage{Prompt: 7, Completion: -1, Cached: -1, Reasoning: -1}})
}

func TestScoreBodies(t *testing.T) {
	h := api.Head{ID: "r1", Model: "m", Created: 1}
	u := api.Usage{Prompt: 12, Completion: -1, Cached: -1, Reasoning: -1}
	apitest.Check(t, api.Score, rerank.AppendScoreBody(nil, &h, []float64{0.5, 0.25}, 12), true,
		apitest.Want{Events: 1, Done: true, Items: 2, Usage: u})
	// SGLang's scoring answer: one list of label probabilities per item.
	apitest.Check(t, api.Score, []byte(`{"scores":[[0.1,0.9],[0.7,0.3],[0.5,0.5]],"model":"m","usage":{"prompt_tokens":12,"completion_tokens":0,"total_tokens":12},"object":"scoring"}`), true,
		apitest.Want{Events: 1, Done: true, Items: 3, Usage: u})
	// A body without any list is no score answer: no output event, counted
	// as unknown (as a chat body without choices has no event either).
	apitest.Check(t, api.Score, []byte(`{"id":"x","object":"list"}`), true, apitest.Want{Usage: api.NoUsage, Done: true, Unknown: 1})
}
