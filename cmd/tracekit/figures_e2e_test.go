package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// synth -> replay --scrape against a mock that reasons before every
// answer and caches prefixes -> analyze --json: the per-request figures
// and the cache hit rates are in the JSON under their documented keys,
// and the token counts and hit rates are the mock's own (its log, and its
// prefix-cache counters as scraped), on each API that reports reasoning
// and cached tokens in its own words.
func TestRequestFiguresAndCacheEndToEnd(t *testing.T) {
	for _, ep := range []string{trace.EndpointChat, trace.EndpointResponses, trace.EndpointMessages} {
		t.Run(ep, func(t *testing.T) { figuresAndCacheEndToEnd(t, ep) })
	}
}

func figuresAndCacheEndToEnd(t *testing.T, ep string) {
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.ReasoningMean, c.Latency.ReasoningCV = 4, 0 })
	dir := t.TempDir()
	tr, rec, js := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "r.parquet"), filepath.Join(dir, "r.json")
	if _, stderr, code := runCLI(t, "synth", "--endpoint", ep, "--conversations", "4", "--turns", "3", "--input-tokens", "40", "--output-tokens", "12",
		"--rate", "0", "--seed", "1", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "-o", rec, "--no-analyze", "--progress", "none", "--no-probe",
		"--scrape", "--scrape-interval", "50ms", "--scrape-timeout", "10s"); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "analyze", rec, "--json", js, "--json-detailed"); code != ExitOK {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		TTFTs    []float64 `json:"ttfts"`
		Tracekit struct {
			PerRequest map[string]json.RawMessage `json:"per_request"`
			Cache      analyze.CacheStats         `json:"cached_tokens"`
			Server     *analyze.ServerReport      `json:"server"`
		} `json:"tracekit"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	var f analyze.RequestFigures
	raw, _ := json.Marshal(out.Tracekit.PerRequest)
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time_to_second_token", "time_to_first_output_token", "reasoning_duration", "decode_itl",
		"output_token_throughput_per_user", "prefill_throughput_per_user", "reasoning_token_count", "answer_token_count",
		"total_reasoning_tokens", "total_answer_tokens", "reasoning_from_usage", "reasoning_counted"} {
		if _, ok := out.Tracekit.PerRequest[k]; !ok {
			t.Errorf("tracekit.per_request lacks %q", k)
		}
	}

	// Ground truth: the mock's log of what it streamed and reported.
	log := srv.Log()
	var reasoning, answer, cached, prompt int64
	for _, e := range log {
		if e.Status != 200 || e.ReasoningTokens != 4 {
			t.Fatalf("mock log: %+v: want a 200 with 4 reasoning tokens", e)
		}
		reasoning += int64(e.ReasoningTokens)
		answer += int64(e.CompletionTokens - e.ReasoningTokens)
		cached += int64(e.CachedTokens)
		prompt += int64(e.PromptTokens)
	}
	n := len(log)
	if n != 12 {
		t.Fatalf("the mock answered %d requests, want 12", n)
	}
	if f.TotalReasoningTokens != reasoning || f.TotalAnswerTokens != answer || f.ReasoningFromUsage != n || f.ReasoningCounted != 0 {
		t.Errorf("reasoning %d answer %d (usage %d, counted %d); the mock streamed %d and %d to %d requests",
			f.TotalReasoningTokens, f.TotalAnswerTokens, f.ReasoningFromUsage, f.ReasoningCounted, reasoning, answer, n)
	}
	// Every stream reasoned first, then answered; each has a second event.
	// A prefill rate needs a TTFT above 0: on a loaded client the first
	// event can arrive before the goroutine stamps its request's send, and
	// the event is then stamped at the send (replay's conn.go).
	timed := 0
	for _, v := range out.TTFTs {
		if v > 0 {
			timed++
		}
	}
	if len(out.TTFTs) != n || timed == 0 {
		t.Errorf("ttfts %v: want %d, some above 0", out.TTFTs, n)
	}
	for name, c := range map[string][2]int{"time_to_second_token": {f.TimeToSecondToken.Count, n},
		"time_to_first_output_token": {f.TimeToFirstOutputToken.Count, n}, "reasoning_duration": {f.ReasoningDuration.Count, n},
		"output_token_throughput_per_user": {f.OutputTokenThroughputPerUser.Count, n}, "prefill_throughput_per_user": {f.PrefillThroughputPerUser.Count, timed}} {
		if c[0] != c[1] {
			t.Errorf("%s over %d requests, want %d", name, c[0], c[1])
		}
	}
	// A duration may be 0: a loaded client can read the last reasoning
	// event and the first answer in one read, which share a stamp. TTFO is
	// TTFT (>= 0, above) plus the duration, so its least is not below the
	// least duration.
	if f.ReasoningDuration.Min < 0 || f.DecodeITL.Count == 0 || f.TimeToFirstOutputToken.Min < f.ReasoningDuration.Min {
		t.Errorf("reasoning %+v, decode itl %+v, ttfo %+v", f.ReasoningDuration, f.DecodeITL, f.TimeToFirstOutputToken)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %.12g, want %.12g", name, got, want)
		}
	}

	// Cache: the run's, per request and per session, against the log.
	c := out.Tracekit.Cache
	if c.CachedTokens != cached || c.PromptTokens != prompt || cached == 0 {
		t.Errorf("cached %d of %d prompt tokens; the mock reported %d of %d", c.CachedTokens, c.PromptTokens, cached, prompt)
	}
	near("hit ratio", c.HitRatio, float64(cached)/float64(prompt))
	if c.PerRequest.Count != n || c.PerSession.Count != 4 || c.PerSession.Max <= 0 || c.PerRequest.Min != 0 {
		t.Errorf("per request %+v, per session %+v: want %d requests (the first turns hit nothing) and 4 sessions", c.PerRequest, c.PerSession, n)
	}
	// The server's counters (scraped) and the client's usage agree.
	if out.Tracekit.Server == nil || len(out.Tracekit.Server.Targets) != 1 {
		t.Fatalf("server report: %+v", out.Tracekit.Server)
	}
	st := out.Tracekit.Server.Targets[0]
	if st.PrefixCacheHitRate == nil || st.ClientPrefixCacheHitRate == nil || st.ClientMinusServerHitRate == nil {
		t.Fatalf("server target: hit rate %v client %v difference %v", st.PrefixCacheHitRate, st.ClientPrefixCacheHitRate, st.ClientMinusServerHitRate)
	}
	near("server hit rate", *st.PrefixCacheHitRate, float64(cached)/float64(prompt))
	near("client hit rate", *st.ClientPrefixCacheHitRate, float64(cached)/float64(prompt))
	near("client - server", *st.ClientMinusServerHitRate, 0)
}
