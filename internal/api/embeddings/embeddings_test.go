package embeddings_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/api/apitest"
	"github.com/tracekit/tracekit/internal/api/embeddings"
	"github.com/tracekit/tracekit/trace"
)

func TestBodies(t *testing.T) {
	h := api.Head{ID: "r1", Model: "BAAI/bge-m3", Created: 1}
	body := embeddings.AppendBody(nil, &h, 3, 4, 17)
	apitest.Check(t, api.Embeddings, body, true, apitest.Want{Events: 1, Done: true, Items: 3, Usage: api.Usage{Prompt: 17, Completion: -1, Cached: -1, Reasoning: -1}})
	// vLLM's body with base64 embeddings (as OpenAI documents the shape).
	apitest.Check(t, api.Embeddings, []byte(`{"id":"embd-1","object":"list","created":1,"model":"m","data":[{"index":0,"object":"embedding","embedding":"AACAPwAAAEA="},{"index":1,"object":"embedding","embedding":"AABAQA=="}],"usage":{"prompt_tokens":9,"total_tokens":9,"completion_tokens":0,"prompt_tokens_details":null}}`), true,
		apitest.Want{Events: 1, Done: true, Items: 2, Usage: api.Usage{Prompt: 9, Completion: -1, Cached: -1, Reasoning: -1}})
	// Errors: OpenAI's envelope, vLLM's older shape; a chat answer.
	apitest.Check(t, api.Embeddings, []byte(`{"error":{"message":"This model's maximum context length is 8192 tokens","type":"BadRequestError","param":null,"code":400}}`), true,
		apitest.Want{Kind: trace.ErrMalformed, MsgHas: "server error: (BadRequestError) This model's maximum context length is 8192 tokens", Usage: api.NoUsage})
	apitest.Check(t, api.Embeddings, []byte(`{"object":"error","message":"The model does not support Embeddings API","type":"BadRequestError","param":null,"code":400}`), true,
		apitest.Want{Kind: trace.ErrMalformed, MsgHas: "The model does not support Embeddings API", Usage: api.NoUsage})
	apitest.Check(t, api.Embeddings, []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"content":"x"}}]}`), true,
		apitest.Want{Kind: api.ErrWrongAPI, MsgHas: "a chat answer where embeddings was asked for", Usage: api.NoUsage})
	apitest.Check(t, api.Embeddings, []byte(`{"data":[1,2`), true,
		apitest.Want{Kind: trace.ErrMalformed, MsgHas: "not a valid JSON object", Usage: api.NoUsage})
}

// The base64 body holds the same values as float32, little-endian, as
// OpenAI's SDKs decode them.
func TestBase64Body(t *testing.T) {
	h := api.Head{ID: "r1", Model: "m", Created: 1}
	body := embeddings.AppendBase64Body(nil, &h, 2, 3, 5)
	apitest.Check(t, api.Embeddings, body, true, apitest.Want{Events: 1, Done: true, Items: 2, Usage: api.Usage{Prompt: 5, Completion: -1, Cached: -1, Reasoning: -1}})
	var b64, floats struct {
		Data []struct{ Embedding json.RawMessage } `json:"data"`
	}
	if err := json.Unmarshal(body, &b64); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(embeddings.AppendBody(nil, &h, 2, 3, 5), &floats); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		var s string
		var want []float64
		json.Unmarshal(b64.Data[k].Embedding, &s)
		json.Unmarshal(floats.Data[k].Embedding, &want)
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) != 12 {
			t.Fatalf("embedding %d: %q: %v", k, s, err)
		}
		for j := range 3 {
			got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
			if math.Abs(float64(got)-want[j]) > 1e-6 {
				t.Errorf("embedding %d value %d: %v, the float body says %v", k, j, got, want[j])
			}
		}
	}
}

func TestNoAlloc(t *testing.T) {
	h := api.Head{ID: "r1", Model: "m"}
	body := embeddings.AppendBody(nil, &h, 8, 64, 100)
	d := embeddings.NewDecoder()
	var out api.Out
	var ev api.Event
	if n := testing.AllocsPerRun(50, func() {
		out.Reset()
		ev.Reset()
		d.Body(body, &out, &ev)
	}); n != 0 || out.Items != 8 {
		t.Fatalf("%v allocations, %d items", n, out.Items)
	}
}
