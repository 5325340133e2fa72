package sweep

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/trace"
)

// capacityMock is a mock whose served request rate saturates at a rate we
// can compute. Per request the mock holds one of MaxNumSeqs = S batch
// slots from admission until its last event (mock/doc.go, "Latency
// model"): the first token comes out of prefill P = PrefillBase +
// PrefillPerToken x uncached prompt tokens after admission (PrefillPerToken
// and the prefix cache are 0 here, so P = PrefillBase), and each of the
// L - 1 further tokens (ignore_eos: exactly max_tokens = L) follows
// d(running) = DecodeBase + DecodePerSeq x (running - 1) after the
// previous one (JitterCV 0: no jitter). With the batch full (running = S)
// a slot turns over every T = P + (L - 1) d(S), so the served rate
// saturates at mu = S / T: below it arrivals at constant gaps never find
// the batch full (the running count is about rate x T <= S) and TTFT is P;
// above it the queue grows by (rate - mu) per second and so does TTFT.
type capacityMock struct {
	name                    string
	seqs, outTokens         int
	prefill, decode, perSeq time.Duration
	stepRequests, warmup    int
	traceRate               float64 // conversation starts per second of the test trace
}

func (m capacityMock) mu() float64 {
	d := m.decode + time.Duration(m.seqs-1)*m.perSeq
	t := m.prefill + time.Duration(m.outTokens-1)*d
	return float64(m.seqs) / t.Seconds()
}

func (m capacityMock) start(t *testing.T) *mock.Server {
	t.Helper()
	c := mock.DefaultConfig()
	c.Latency = mock.Latency{
		PrefillBase: mock.Duration(m.prefill), DecodeBase: mock.Duration(m.decode), DecodePerSeq: mock.Duration(m.perSeq),
		TokensPerEvent: 1, MaxNumSeqs: m.seqs, OutputMean: m.outTokens, MaxModelLen: 1 << 16,
	}
	c.KeepLog = true
	srv := mocktest.StartConfig(t, c)
	return srv
}

// writeUniformTrace writes n one-turn conversations starting at constant
// gaps of 1/rate seconds, each asking for out tokens.
func writeUniformTrace(t *testing.T, path string, n int, rate float64, out int) {
	t.Helper()
	gap := time.Duration(float64(time.Second) / rate)
	turns := make([]trace.Turn, n)
	for i := range turns {
		at := int64(i) * int64(gap)
		id := fmt.Sprintf("c%04d", i)
		turns[i] = trace.Turn{ConversationID: id, StartOffsetNs: at, ArrivalOffsetNs: at,
			Messages:    []trace.Message{{Role: "user", Content: "capacity probe " + id, Tokens: 4}},
			InputTokens: 4, OutputTokens: int32(out)}
	}
	if err := trace.WriteTrace(path, trace.TraceMeta{TracekitVersion: trace.Version, Source: "test", Tokenizer: "o200k_base"}, turns); err != nil {
		t.Fatal(err)
	}
}

// sweepMock runs a search on axis over [lo, hi] of the trace at path
// against srv and returns the summary.
func (m capacityMock) sweep(t *testing.T, srv *mock.Server, tracePath string, axis Axis, lo, hi float64) *Summary {
	t.Helper()
	dir := t.TempDir()
	crit := Criteria{SLO: SLO{{Metric: MetricTTFT, P: 50, Threshold: m.ttftSLO()}}, MaxErrorRate: 0.01,
		// The mock runs in this process: the Go scheduler latency of the
		// run health covers its goroutines too, so a step on a starved
		// machine is marked distorted (and run again) instead of moving the
		// answer. CPU is the client's and the mock's together: not a sign.
		MaxClientLag: 20 * time.Millisecond, MaxClientCPU: 1}
	var progress strings.Builder
	st, err := NewReplayStepper(ReplayOptions{
		Base: replay.Config{Trace: tracePath, Targets: []string{srv.URL()}, IgnoreEOS: true, ContinuousUsage: "on",
			Warmup: m.warmup, Seed: 7, IdleTimeout: 30 * time.Second, ReadyTimeout: 10 * time.Second,
		},
		Dir: dir, StepRequests: m.stepRequests, StepTimeout: 2 * time.Minute, DrainTimeout: 30 * time.Second,
		Criteria: crit, EarlyStop: true, Progress: &progress, ProgressEvery: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), st, Config{
		Plan:     Plan{Axis: axis, Search: &SearchSpec{Start: lo, Min: lo, Max: hi, Resolution: 0.05}},
		Criteria: crit, Info: Info{Trace: tracePath, TraceRate: st.TraceRate()}, RetryDistorted: 2,
		OnStep: func(s *Summary) {
			if err := s.WriteAll(dir); err != nil {
				t.Error(err)
			}
		},
	})
	if err != nil {
		t.Fatalf("%s sweep on %s: %v\n%s", m.name, axis, err, progress.String())
	}
	var table strings.Builder
	sum.WriteText(&table)
	t.Logf("%s, %s search (mu %.2f req/s):\n%s", m.name, axis, m.mu(), table.String())
	for _, r := range sum.Steps {
		if _, err := trace.OpenRecording(filepath.Join(dir, r.Recording)); err != nil {
			t.Errorf("step %d's recording: %v", r.Index, err)
		}
	}
	return sum
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool { return math.Abs(got/want-1) <= frac }

// checkCapacity asserts the knee's throughput and the SLO answer (as
// offered requests per second: one-turn conversations) within 10% of mu.
func (m capacityMock) checkCapacity(t *testing.T, sum *Summary) {
	t.Helper()
	mu := m.mu()
	if sum.Knee == nil || !within(sum.Knee.Throughput, mu, 0.10) {
		t.Errorf("%s: knee %+v, want throughput within 10%% of mu = %.2f req/s", m.name, sum.Knee, mu)
	}
	a := sum.Answer
	if a == nil || !a.Found || a.Upper == 0 || !a.Resolved {
		t.Fatalf("%s: answer %+v: want one bounded at 5%%", m.name, a)
	}
	if !within(a.OfferedConvRate, mu, 0.10) {
		t.Errorf("%s: SLO answer %.2f conversations/s, want within 10%% of mu = %.2f", m.name, a.OfferedConvRate, mu)
	}
	lo, up := sum.step(a.Lower), sum.step(a.Upper)
	if !lo.Pass || up.Pass || lo.Distorted {
		t.Errorf("%s: bounding steps %d (%s) and %d (%s)", m.name, lo.Index, lo.Verdict, up.Index, up.Verdict)
	}
}

// The objective is TTFT p50 <= P + a few service slots (1/mu). Below mu
// TTFT is P, so only a queue of that many requests fails a step, and only
// when it holds for half of them: the bursts of late dispatches and the
// scheduling delays of a loaded machine hit a minority of requests. A step
// x above mu builds that queue by its median request once x * N/2 exceeds
// it. Long batch turnovers (T) keep the mock's own per-request overhead on
// a loaded machine a small share of T.
var (
	mockA = capacityMock{name: "S=16 L=16", seqs: 16, outTokens: 16, prefill: 10 * time.Millisecond, decode: 10 * time.Millisecond,
		perSeq: 500 * time.Microsecond, stepRequests: 120, warmup: 10, traceRate: 35}
	mockB = capacityMock{name: "S=8 L=20", seqs: 8, outTokens: 20, prefill: 10 * time.Millisecond, decode: 4 * time.Millisecond,
		perSeq: 500 * time.Microsecond, stepRequests: 120, warmup: 10, traceRate: 32}
)

// ttftSLO is P + 2.5 service slots, to the millisecond: the failing step
// is then about 2.5 / (N/2) = 4% above mu. The traces start at 0.6 mu, so
// the bracket is 0.6 mu, 1.2 mu.
func (m capacityMock) ttftSLO() time.Duration {
	return (m.prefill + time.Duration(2.5/m.mu()*float64(time.Second))).Round(time.Millisecond)
}

// keptModel reports whether the mock kept to its latency model during a
// sweep: the analytic capacity holds only then. Its ground-truth log says
// how late each event was written against the model's schedule; a slot is
// held as much longer as its request's last event was late, so the mean of
// that above 3% of T means the machine starved the mock.
func (m capacityMock) keptModel(t *testing.T, srv *mock.Server) bool {
	var sum float64
	n := 0
	for _, e := range srv.Log() {
		if k := len(e.EventLatenessNs); k > 0 {
			sum += float64(e.EventLatenessNs[k-1])
			n++
		}
	}
	mean := sum / float64(max(n, 1))
	limit := 0.03 * float64(m.prefill+time.Duration(m.outTokens-1)*(m.decode+time.Duration(m.seqs-1)*m.perSeq))
	if mean > limit {
		t.Logf("%s: the mock wrote the requests' last events %.1f ms late on average (%d requests), above 3%% of T (%.1f ms)", m.name, mean/1e6, n, limit/1e6)
		return false
	}
	return true
}

// sweepClean runs the sweep until it is evidence about the analytic
// capacity, at most 3 times: a run is no evidence when the machine starved
// the mock (it fell behind its own model) or the client (a step it
// distorted bounds the answer). The assertions apply to the first run that
// is evidence, whatever its answer; when none is, the machine was too
// loaded to measure a capacity and the test skips, saying so, rather than
// fail on what the code did not do.
func (m capacityMock) sweepClean(t *testing.T, tracePath string, axis Axis, lo, hi float64) *Summary {
	t.Helper()
	for try := 1; try <= 3; try++ {
		srv := m.start(t)
		sum := m.sweep(t, srv, tracePath, axis, lo, hi)
		if m.keptModel(t, srv) && !boundedByDistortion(sum) {
			return sum
		}
		t.Logf("%s %s: attempt %d is no evidence (see above); running the sweep again", m.name, axis, try)
	}
	t.Skipf("%s %s: in 3 attempts the machine starved the mock or the client every time: no evidence about its capacity", m.name, axis)
	return nil
}

// boundedByDistortion reports whether a step the client distorted bounds
// the sweep's answer (or no answer was found beside distorted steps).
func boundedByDistortion(sum *Summary) bool {
	for _, r := range sum.Steps {
		if !r.Distorted {
			continue
		}
		a := sum.Answer
		if a == nil || !a.Found || r.Index == a.Upper || r.Index == a.Lower {
			return true
		}
	}
	return false
}

// The knee and the SLO answer of a search against the mock fall within
// 10% of its analytic capacity, for two configurations; and a search on
// --rate over the same traffic re-timed to another base rate finds the
// speed search's answer within the resolution.
func TestSweepFindsMockCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs two dozen replays against the mock")
	}
	dir := t.TempDir()
	n := func(m capacityMock) int { return m.stepRequests + m.warmup + 5 }
	trA, trB, half := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet"), filepath.Join(dir, "b-half.parquet")
	writeUniformTrace(t, trA, n(mockA), mockA.traceRate, mockA.outTokens)
	writeUniformTrace(t, trB, n(mockB), mockB.traceRate, mockB.outTokens)
	// The same schedule at half the base rate: rate R runs as speed R /
	// (traceRate / 2), the speeds twice those of the speed search.
	writeUniformTrace(t, half, n(mockB), mockB.traceRate/2, mockB.outTokens)

	mockA.checkCapacity(t, mockA.sweepClean(t, trA, AxisSpeed, 1, 16))
	bySpeed := mockB.sweepClean(t, trB, AxisSpeed, 1, 16)
	mockB.checkCapacity(t, bySpeed)
	byRate := mockB.sweepClean(t, half, AxisRate, mockB.traceRate, 16*mockB.traceRate)
	mockB.checkCapacity(t, byRate)
	for _, r := range byRate.Steps {
		if want := r.Load.Value / byRate.Info.TraceRate; math.Abs(r.Speed/want-1) > 1e-9 {
			t.Errorf("rate step %d: speed %g, want rate / trace rate = %g", r.Index, r.Speed, want)
		}
	}
	if t.Failed() {
		return
	}
	// Each answer is bounded within 5% by a passing and a failing step:
	// the two agree within the resolution when their bounds overlap.
	sa, sr := bySpeed.Answer, byRate.Answer
	loS, hiS := sa.OfferedConvRate, bySpeed.step(sa.Upper).OfferedConvRate
	loR, hiR := sr.Load, sr.UpperLoad
	if loS > hiR*(1+1e-6) || loR > hiS*(1+1e-6) {
		t.Errorf("speed search bounds %.2f-%.2f conversations/s and rate search bounds %.2f-%.2f do not overlap", loS, hiS, loR, hiR)
	}
}
