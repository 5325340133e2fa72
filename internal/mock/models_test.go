package mock

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServedModelsHaveTheirOwnLatency: each served model's requests follow
// its own latency (the override's keys, the base's for the others), the log
// names the model, /v1/models lists every name, and StrictModel 404s a name
// not served.
func TestServedModelsHaveTheirOwnLatency(t *testing.T) {
	const baseITL, fastITL, prefill = 9 * time.Millisecond, 2 * time.Millisecond, 7 * time.Millisecond
	srv := startMock(t, func(c *Config) {
		c.Model, c.StrictModel = "big", true
		c.Latency.DecodeBase, c.Latency.PrefillBase, c.Latency.PrefillPerToken = Duration(baseITL), Duration(prefill), 0
		c.Latency.JitterCV = 0
		c.Models = []ModelConfig{{Name: "small", Latency: json.RawMessage(`{"decode_base":"2ms"}`)}, {Name: "alias"}}
	})

	resp, err := http.Get(srv.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	if strings.Join(ids, ",") != "big,small,alias" {
		t.Fatalf("/v1/models lists %v, want big, small, alias", ids)
	}

	for _, tc := range []struct {
		model string
		itl   time.Duration
	}{{"big", baseITL}, {"small", fastITL}, {"alias", baseITL}} {
		body := chatBody(5, true, "user", "hello")
		body["model"] = tc.model
		sse(post(t, srv, "/v1/chat/completions", body, map[string]string{"X-Request-Id": tc.model}))
		e := entryByID(t, srv, tc.model)
		if e.Model != tc.model {
			t.Fatalf("log names model %q, want %q", e.Model, tc.model)
		}
		due := func(i int) int64 { return e.EventMonoNs[i] - e.EventLatenessNs[i] }
		if got := time.Duration(due(1) - e.AdmitMonoNs); got != prefill {
			t.Fatalf("%s: first token due %v after admission, want the base's prefill %v", tc.model, got, prefill)
		}
		for i := 2; i < len(e.EventMonoNs); i++ {
			if got := time.Duration(due(i) - due(i-1)); got != tc.itl {
				t.Fatalf("%s: event %d due %v after the previous, want %v", tc.model, i, got, tc.itl)
			}
		}
	}
	body := chatBody(2, false, "user", "x")
	body["model"] = "other"
	if resp := post(t, srv, "/v1/chat/completions", body, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d for a model not served, want 404", resp.StatusCode)
	}
}

func TestModelsConfigErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"models":[{"name":"a","latency":{"decode_bse":"1ms"}}]}`, `models[0] (a): latency: json: unknown field "decode_bse"`},
		{`{"models":[{"name":"a","latency":{"max_num_seqs":4}}]}`, "max_num_seqs and prefix_cache_tokens are the server's"},
		{`{"models":[{"name":"a","latency":{"decode_base":"-1ms"}}]}`, "models[0] (a): latency durations must not be negative"},
		{`{"model":"a","models":[{"name":"a"}]}`, `models[0]: model "a" is served twice`},
		{`{"models":[{"latency":{}}]}`, "models[0]: name must not be empty"},
	} {
		p := filepath.Join(t.TempDir(), "mock.json")
		if err := os.WriteFile(p, []byte(tc.json), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(p, DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.json, err, tc.want)
		}
	}
}
