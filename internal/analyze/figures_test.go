package analyze

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// The per-request figures of responsesRecords, computed by hand:
//
//	a: sent 1000, events 1100 1150 1200 | 1300 1400 (answer from the 4th),
//	   usage: 6 output, 3 reasoning, prompt 10
//	b: sent 2000, events 2050 | 2250 2350, usage: 4 output, 2 reasoning, prompt 20
//	c: sent 3000, events 3100 3200, all reasoning, usage: 4 output, no
//	   reasoning figure: counted 2+2 from the stream, prompt 30
func TestRequestFiguresHandComputed(t *testing.T) {
	s := Records(responsesRecords(), trace.RunMeta{}, Options{Percentiles: []float64{50}})
	f := s.Figures
	// TTST: 1150-1100, 2250-2050, 3200-3100.
	if f.TimeToSecondToken.Count != 3 {
		t.Fatalf("ttst count %d", f.TimeToSecondToken.Count)
	}
	near(t, "ttst mean", f.TimeToSecondToken.Mean, (50+200+100)/3.0)
	near(t, "ttst median", f.TimeToSecondToken.Median, 100)
	// TTFO: 1300-1000, 2250-2000; c never answered.
	if f.TimeToFirstOutputToken.Count != 2 {
		t.Fatalf("ttfo count %d", f.TimeToFirstOutputToken.Count)
	}
	near(t, "ttfo mean", f.TimeToFirstOutputToken.Mean, 275)
	// Reasoning: first event to the first answer event (1300-1100,
	// 2250-2050), c to its last event (3200-3100).
	if f.ReasoningDuration.Count != 3 {
		t.Fatalf("reasoning count %d", f.ReasoningDuration.Count)
	}
	near(t, "reasoning mean", f.ReasoningDuration.Mean, (200+200+100)/3.0)
	near(t, "reasoning max", f.ReasoningDuration.Max, 200)
	// Decode gaps after each stream's first: a 50 100 100, b 100, c none.
	if f.DecodeITL.Count != 4 {
		t.Fatalf("decode itl count %d", f.DecodeITL.Count)
	}
	near(t, "decode itl mean", f.DecodeITL.Mean, 87.5)
	near(t, "decode itl min", f.DecodeITL.Min, 50)
	// TPOT a (400-100)/5 = 60 ms, b (350-50)/3 = 100 ms, c (200-100)/3 ms.
	o := f.OutputTokenThroughputPerUser
	if o.Count != 3 {
		t.Fatalf("output tps count %d", o.Count)
	}
	near(t, "output tps mean", o.Mean, (1000.0/60+10+30)/3)
	near(t, "output tps median", o.Median, 1000.0/60)
	near(t, "output tps max", o.Max, 30)
	// Prefill: 10/0.1 s, 20/0.05 s, 30/0.1 s.
	p := f.PrefillThroughputPerUser
	near(t, "prefill mean", p.Mean, (100+400+300)/3.0)
	near(t, "prefill median", p.Median, 300)
	near(t, "prefill p50", p.Percentiles[0].Value, 300)
	// Reasoning 3, 2, 4 (counted); answer 3, 2, 0.
	near(t, "reasoning tokens mean", f.ReasoningTokenCount.Mean, 3)
	near(t, "answer tokens max", f.AnswerTokenCount.Max, 3)
	near(t, "answer tokens min", f.AnswerTokenCount.Min, 0)
	if f.TotalReasoningTokens != 9 || f.TotalAnswerTokens != 5 || f.ReasoningFromUsage != 2 || f.ReasoningCounted != 1 {
		t.Errorf("totals: reasoning %d answer %d, from usage %d counted %d; want 9 5 2 1",
			f.TotalReasoningTokens, f.TotalAnswerTokens, f.ReasoningFromUsage, f.ReasoningCounted)
	}

	// The per-request file's row of a.
	row := s.row(&s.Reqs[0])
	near(t, "row ttst", row.TTSTms, 50)
	near(t, "row reasoning", row.ReasoningMs, 200)
	near(t, "row output tps", row.OutputTPSPerUser, 1000.0/60)
	near(t, "row prefill tps", row.PrefillTPSPerUser, 100)
	near(t, "row cache hit rate", row.CacheHitRate, -1)
	if row.ReasoningCount != 3 || row.AnswerCount != 3 {
		t.Errorf("row tokens: reasoning %d answer %d", row.ReasoningCount, row.AnswerCount)
	}

	// The JSON carries them under AIPerf's names; text and HTML name them too.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		PerRequest map[string]json.RawMessage `json:"per_request"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var prefill Values
	if err := json.Unmarshal(doc.PerRequest["prefill_throughput_per_user"], &prefill); err != nil || prefill.Median != 300 {
		t.Errorf("json prefill_throughput_per_user %s (%v)", doc.PerRequest["prefill_throughput_per_user"], err)
	}
	text, page := textOf(t, s), htmlOf(t, s)
	for _, k := range []string{"time_to_second_token", "time_to_first_output_token", "reasoning_duration", "decode_itl",
		"output_token_throughput_per_user", "prefill_throughput_per_user", "reasoning_token_count", "answer_token_count"} {
		if _, ok := doc.PerRequest[k]; !ok {
			t.Errorf("json per_request lacks %s", k)
		}
		if !strings.Contains(text, k) || !strings.Contains(page, "<th>"+k+"</th>") {
			t.Errorf("text or html lacks %s", k)
		}
	}
}

// A chat stream whose first event is vLLM's role-only chunk reasoned
// nothing: no reasoning duration, every output token an answer token.
func TestRequestFiguresPlainChat(t *testing.T) {
	r := rec("r", 0, 0, 0, 0, 400, 200, "", 8, 8, 4, -1,
		[2]int64{100, 0}, [2]int64{150, 1}, [2]int64{250, 2}, [2]int64{400, 1})
	r.FirstAnswerEvent, r.ReasoningTokens = 1, -1
	f := Records([]trace.Record{r}, trace.RunMeta{}, Options{}).Figures
	if f.ReasoningDuration.Count != 0 || f.TotalReasoningTokens != 0 || f.TotalAnswerTokens != 4 {
		t.Errorf("reasoning %d streams, %d tokens; answer %d tokens", f.ReasoningDuration.Count, f.TotalReasoningTokens, f.TotalAnswerTokens)
	}
	near(t, "ttst", f.TimeToSecondToken.Mean, 50)
	near(t, "ttfo", f.TimeToFirstOutputToken.Mean, 150)
	// Gaps after the first: 100, 150.
	near(t, "decode itl", f.DecodeITL.Mean, 125)
	// TPOT (400-100)/3 = 100 ms: 10 tok/s; prefill 8 / 0.1 s.
	near(t, "output tps", f.OutputTokenThroughputPerUser.Mean, 10)
	near(t, "prefill tps", f.PrefillThroughputPerUser.Mean, 80)
}

func htmlOf(t *testing.T, s *Summary) string {
	t.Helper()
	var b strings.Builder
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Prefix-cache hit rates per request and per session, by hand: session A
// hits 0 of 100 then 100 of 200 tokens, session B 25 of 50, then fails,
// then does not report; a request that did not report counts nowhere.
func TestCacheHitRatesPerRequestAndSession(t *testing.T) {
	a0 := rec("a0", 0, 0, 0, 0, 300, 200, "", 100, 100, 2, 0, [2]int64{100, 1}, [2]int64{200, 1})
	a1 := rec("a1", 1, 400, 400, 400, 700, 200, "", 200, 200, 2, 100, [2]int64{500, 1}, [2]int64{600, 1})
	b0 := rec("b0", 0, 0, 0, 0, 300, 200, "", 50, 50, 2, 25, [2]int64{100, 1}, [2]int64{200, 1})
	b1 := rec("b1", 1, 400, 400, 400, 700, 500, trace.ErrHTTPStatus, 60, 60, -1, 30)
	b2 := rec("b2", 2, 800, 800, 800, 900, 200, "", 10, 10, 1, -1, [2]int64{850, 1})
	a0.ConversationID, a1.ConversationID = "A", "A"
	b0.ConversationID, b1.ConversationID, b2.ConversationID = "B", "B", "B"
	c := Records([]trace.Record{a0, a1, b0, b1, b2}, trace.RunMeta{}, Options{Percentiles: []float64{50}}).Cache
	if c.Reporting != 3 || c.CachedTokens != 125 || c.PromptTokens != 350 {
		t.Fatalf("cache %+v", c)
	}
	// Requests: 0, 0.5, 0.5.
	if c.PerRequest.Count != 3 {
		t.Fatalf("per request over %d", c.PerRequest.Count)
	}
	near(t, "per request mean", c.PerRequest.Mean, 1.0/3)
	near(t, "per request median", c.PerRequest.Median, 0.5)
	near(t, "per request min", c.PerRequest.Min, 0)
	// Sessions: A 100/300, B 25/50.
	if c.PerSession.Count != 2 {
		t.Fatalf("per session over %d", c.PerSession.Count)
	}
	near(t, "per session min", c.PerSession.Min, 1.0/3)
	near(t, "per session max", c.PerSession.Max, 0.5)
	near(t, "per session mean", c.PerSession.Mean, (1.0/3+0.5)/2)
}
