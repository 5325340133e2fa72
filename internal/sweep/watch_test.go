package sweep

import (
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// rec is a successful streamed request with the given TTFT and 4 tokens
// 10 ms apart.
func rec(ttft time.Duration, warmup bool) *trace.Record {
	first := int64(ttft)
	return &trace.Record{Status: 200, Warmup: warmup, SentNs: 0, CompletionTokens: 4, PromptTokens: 3, CachedTokens: -1,
		EventNs: []int64{first, first + 10e6, first + 20e6, first + 30e6}, EventTokens: []int32{1, 1, 1, 1}, DoneNs: first + 30e6}
}

func failed() *trace.Record { return &trace.Record{ErrorKind: trace.ErrConnect, CachedTokens: -1} }

type stops struct{ reasons []string }

func (s *stops) stop(r string) { s.reasons = append(s.reasons, r) }

// With a planned count the watch stops exactly when the failure becomes
// certain, passes every record on, and ignores warm-up.
func TestWatchCertainFailure(t *testing.T) {
	crit := Criteria{SLO: SLO{{Metric: MetricTTFT, P: 90, Threshold: 100 * time.Millisecond}}, MaxErrorRate: 0.05}
	var mem record.Memory
	var st stops
	w := NewWatch(&mem, crit, 60, 0, st.stop)
	need := certainFailCount(60, 90) // 7
	for range 10 {
		w.Submit(rec(time.Second, true)) // warm-up: not counted
	}
	for i := range need {
		if len(st.reasons) != 0 {
			t.Fatalf("stopped after %d slow requests, before %d", i, need)
		}
		w.Submit(rec(200*time.Millisecond, false))
		w.Submit(rec(10*time.Millisecond, false))
	}
	if len(st.reasons) != 1 || !strings.Contains(st.reasons[0], "7 of at most 60 ttft samples exceed 100ms") || w.Reason() != st.reasons[0] {
		t.Fatalf("reasons %q", st.reasons)
	}
	w.Submit(rec(time.Second, false))
	if len(st.reasons) != 1 || len(mem.Records()) != 10+2*need+1 {
		t.Errorf("stop called %d times; %d records passed on", len(st.reasons), len(mem.Records()))
	}

	// Errors: more than 5% of 60 (3) is certain.
	st = stops{}
	w = NewWatch(&mem, crit, 60, 0, st.stop)
	for range 3 {
		w.Submit(failed())
	}
	if len(st.reasons) != 0 {
		t.Fatalf("stopped at 3 errors of 60 with a 5%% limit: %q", st.reasons)
	}
	w.Submit(failed())
	if len(st.reasons) != 1 || !strings.Contains(st.reasons[0], "4 of at most 60 measured requests failed") {
		t.Errorf("reasons %q", st.reasons)
	}

	// Goodput: with a 90% target, 7 bad of 60 is certain (6 is 10%).
	st = stops{}
	crit.GoodputTarget = 0.9
	crit.SLO = SLO{{Metric: MetricTPOT, P: 50, Threshold: 5 * time.Millisecond}} // every TPOT is 10 ms; p50 is certain only at 31
	w = NewWatch(&mem, crit, 60, 0, st.stop)
	for i := range 7 {
		if len(st.reasons) != 0 && i < 7 {
			t.Fatalf("stopped after %d bad requests", i)
		}
		w.Submit(rec(10*time.Millisecond, false))
	}
	if len(st.reasons) != 1 || !strings.Contains(st.reasons[0], "goodput cannot reach 90.0%") {
		t.Errorf("reasons %q", st.reasons)
	}
}

// Without a planned count only the wide-margin rule applies: the running
// percentile above twice the threshold for a quarter of the step's
// duration, with at least MinSamples requests.
func TestWatchWideMargin(t *testing.T) {
	crit := Criteria{SLO: SLO{{Metric: MetricITL, P: 50, Threshold: 4 * time.Millisecond}}, MaxErrorRate: 0.5}
	var mem record.Memory
	var st stops
	now := time.Unix(0, 0)
	w := NewWatch(&mem, crit, 0, 40*time.Second, st.stop)
	w.now = func() time.Time { return now }
	for i := range MinSamples + 15 { // gaps of 10 ms > 2 x 4 ms
		w.Submit(rec(10*time.Millisecond, false))
		now = now.Add(time.Second)
		if i < MinSamples-1+10 && len(st.reasons) != 0 {
			t.Fatalf("stopped after %d requests (%v): %q", i+1, now, st.reasons)
		}
	}
	if len(st.reasons) != 1 || !strings.Contains(st.reasons[0], "running itl p50 stayed above 2 x 4ms") {
		t.Errorf("reasons %q", st.reasons)
	}
}
