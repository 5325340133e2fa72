package mock

import (
	"fmt"
	"strings"
	"testing"
)

// Speculative mode: every event after the first token is one step of 1
// to k+1 tokens, the log's steps are the counters' on /metrics, and the
// per-position counters fall off with position and add up to the
// accepted tokens. Without it vLLM's spec families are absent.
func TestSpecDecodeEventsAndCounters(t *testing.T) {
	const k = 3
	srv := startMock(t, func(c *Config) { c.Latency.SpecK, c.Latency.SpecAccept = k, 0.6 })
	for i := range 6 {
		body := chatBody(40, true, "user", strings.Repeat("word ", 1+i))
		body["ignore_eos"] = true
		if err := postDrain(srv, body, fmt.Sprint("s", i)); err != nil {
			t.Fatal(err)
		}
	}
	var steps, accepted int64
	sizes := map[int32]int{}
	for _, e := range srv.Log() {
		var toks int32
		first := true
		for _, n := range e.EventTokens {
			if n == 0 {
				continue
			}
			toks += n
			if first {
				first = false
				if n != 1 {
					t.Fatalf("%s: the first token's event carries %d tokens", e.RequestID, n)
				}
				continue
			}
			if n < 1 || n > k+1 {
				t.Fatalf("%s: an event of %d tokens, want 1..%d", e.RequestID, n, k+1)
			}
			steps++
			accepted += int64(n - 1)
			sizes[n]++
		}
		if toks != 40 {
			t.Fatalf("%s: %d tokens streamed, want 40", e.RequestID, toks)
		}
	}
	if len(sizes) < 3 {
		t.Fatalf("step sizes %v: the draws do not vary", sizes)
	}
	st := srv.Stats()
	if st.SpecDrafts != steps || st.SpecDraftTokens != k*steps || st.SpecAcceptedTokens != accepted {
		t.Fatalf("stats %+v; the log: %d steps, %d accepted", st, steps, accepted)
	}
	fams := scrape(t, srv)
	for name, want := range map[string]int64{"vllm:spec_decode_num_drafts_total": steps,
		"vllm:spec_decode_num_draft_tokens_total": k * steps, "vllm:spec_decode_num_accepted_tokens_total": accepted} {
		if v := one(t, fams, name, "tracekit-mock").GetCounter().GetValue(); v != float64(want) {
			t.Errorf("%s = %g, want %d", name, v, want)
		}
	}
	f := fams["vllm:spec_decode_num_accepted_tokens_per_pos_total"]
	if f == nil || len(f.Metric) != k {
		t.Fatalf("per-position family: %v", f)
	}
	var sum, prev float64 = 0, float64(steps)
	for i, m := range f.Metric {
		v := m.GetCounter().GetValue()
		var pos string
		for _, l := range m.Label {
			if l.GetName() == "position" {
				pos = l.GetValue()
			}
		}
		if pos != fmt.Sprint(i) || v > prev {
			t.Errorf("position %q = %g after %g: want positions in order, accepted no more often than the one before", pos, v, prev)
		}
		sum, prev = sum+v, v
	}
	if sum != float64(accepted) {
		t.Errorf("per-position counters add up to %g, accepted %d", sum, accepted)
	}

	plain := startMock(t, nil)
	if err := postDrain(plain, chatBody(8, true, "user", "hi"), "p"); err != nil {
		t.Fatal(err)
	}
	if f := scrape(t, plain)["vllm:spec_decode_num_drafts_total"]; f != nil {
		t.Errorf("spec counters exported without speculative decoding: %v", f)
	}
}

func TestSpecConfigValidate(t *testing.T) {
	for _, c := range []struct {
		k, tpe int
		p      float64
		want   string
	}{
		{-1, 1, 0.5, "spec_k -1 must be >= 0"},
		{65, 1, 0.5, "spec_k 65 must be <= 64"},
		{2, 1, 1.5, "spec_accept 1.5 must be between 0 and 1"},
		{2, 1, -0.1, "spec_accept -0.1 must be between 0 and 1"},
		{2, 3, 0.5, "spec_k 2 and tokens_per_event 3"},
		{2, 1, 1, ""},
		{0, 4, 0, ""},
	} {
		cfg := DefaultConfig()
		cfg.Latency.SpecK, cfg.Latency.TokensPerEvent, cfg.Latency.SpecAccept = c.k, c.tpe, c.p
		err := cfg.Validate()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("k %d, tokens_per_event %d, accept %g: %v; want %q", c.k, c.tpe, c.p, err, c.want)
		}
	}
}
