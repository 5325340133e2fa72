package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/calibrate"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/sweep"
	"github.com/tracekit/tracekit/trace"
)

// sweepMock is a mock configuration whose served request rate saturates at
// a rate we can compute (the derivation is sweep/mock_test.go's
// capacityMock): with MaxNumSeqs = S slots, a fixed output of L tokens
// (ignore_eos), prefill P and inter-token time d(S) = DecodeBase +
// DecodePerSeq x (S - 1) with the batch full, a slot turns over every
// T = P + (L - 1) d(S), so the served rate saturates at mu = S / T.
type sweepMock struct {
	name                    string
	seqs, out               int
	prefill, decode, perSeq time.Duration
	traceRate               float64 // conversation starts per second of the trace (about 0.6 mu)
}

func (m sweepMock) mu() float64 {
	t := m.prefill + time.Duration(m.out-1)*(m.decode+time.Duration(m.seqs-1)*m.perSeq)
	return float64(m.seqs) / t.Seconds()
}

// ttftSLO is P + 2.5 service slots (1/mu), to the millisecond: below mu
// TTFT is P, above it the queue passes 2.5 slots by a step's median
// request about 4% above mu.
func (m sweepMock) ttftSLO() time.Duration {
	return (m.prefill + time.Duration(2.5/m.mu()*float64(time.Second))).Round(time.Millisecond)
}

func (m sweepMock) mockArgs(logPath string) []string {
	return []string{"mock", "--listen", "127.0.0.1:0", "--max-num-seqs", fmt.Sprint(m.seqs), "--prefill-base", durFlag(m.prefill),
		"--prefill-per-token", "0", "--decode-base", durFlag(m.decode), "--decode-per-seq", durFlag(m.perSeq), "--jitter-cv", "0",
		"--tokens-per-event", "1", "--output-mean", fmt.Sprint(m.out), "--max-model-len", "65536", "--prefix-cache-tokens", "0",
		"--emit-log", logPath}
}

// durFlag writes d as a flag value a shell user types (us, not µs).
func durFlag(d time.Duration) string {
	if d%time.Millisecond != 0 {
		return fmt.Sprintf("%dus", d.Microseconds())
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

const (
	sweepStepRequests = 120
	sweepWarmup       = 10
)

func sweepArgs(m sweepMock, tr, url, out string) []string {
	return []string{"sweep", tr, "--target", url, "--out", out, "--search", "speed:1-16", "--resolution", "5%",
		"--slo", fmt.Sprintf("ttft:p50:%dms", m.ttftSLO().Milliseconds()), "--step-requests", fmt.Sprint(sweepStepRequests),
		"--warmup", fmt.Sprint(sweepWarmup), "--seed", "7", "--ignore-eos", "--continuous-usage", "on", "--model", "tracekit-mock",
		"--idle-timeout", "30s", "--ready-timeout", "10s", "--step-timeout", "2m", "--drain-timeout", "30s", "--progress-every", "10s"}
}

// The two configurations of sweep's capacity test.
var sweepMocks = []sweepMock{
	{name: "S=16 L=16", seqs: 16, out: 16, prefill: 10 * time.Millisecond, decode: 10 * time.Millisecond, perSeq: 500 * time.Microsecond, traceRate: 35},
	{name: "S=8 L=20", seqs: 8, out: 20, prefill: 10 * time.Millisecond, decode: 4 * time.Millisecond, perSeq: 500 * time.Microsecond, traceRate: 32},
}

// sweepBench: the sweep's goals. `tracekit sweep --search speed` against a
// mock child of analytic capacity, for two configurations: how many steps
// the search takes to its answer at 5% resolution, where the answer and
// the knee fall against mu, and each step's client health: the dispatch
// lag and scheduler latency the summary carries, and the event stamp
// error by calibrate's method (calibrate.Join of the step's recording with
// the mock's ground-truth log: client stamp minus the mock's write time,
// loopback delivery included).
func sweepBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "sweep search on the mock (tracekit sweep, mock child of analytic capacity)"
	var figs []figure
	for i, m := range sweepMocks {
		f, err := sweepOne(ctx, e, m, filepath.Join(e.work, fmt.Sprintf("sweep-%d", i)))
		for k := range f {
			f[k].Section = sec
		}
		figs = append(figs, f...)
		if err != nil {
			return figs, fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return figs, nil
}

func sweepOne(ctx context.Context, e *env, m sweepMock, dir string) ([]figure, error) {
	tr, logPath, out := dir+"-trace.parquet", dir+"-mock.parquet", dir
	if err := writeUniformTrace(tr, sweepStepRequests+sweepWarmup+5, m.traceRate, m.out); err != nil {
		return nil, err
	}
	url, stop, err := startMock(ctx, e.bin, m.mockArgs(logPath))
	if err != nil {
		return nil, err
	}
	cmd := "bin/tracekit " + shellJoin(m.mockArgs("mock-log.parquet")) + " &  bin/tracekit " +
		shellJoin(sweepArgs(m, "trace.parquet", "http://127.0.0.1:PORT", "sweep-out")) +
		"   # trace.parquet: " + fmt.Sprintf("%d one-turn conversations at constant gaps of 1/%g s, %d output tokens", sweepStepRequests+sweepWarmup+5, m.traceRate, m.out)
	e.logf("  %s: sweep (mu %.1f req/s)", m.name, m.mu())
	_, sout, runErr := elapsed(exec.CommandContext(ctx, e.bin, sweepArgs(m, tr, url, out)...))
	stop() // writes the mock's log
	// Exit 1 with a summary is a sweep in which no step passed: figures
	// still (a miss), not a failed stage.
	sum, err := sweep.ReadSummary(filepath.Join(out, "sweep.json"))
	if err != nil {
		return nil, fmt.Errorf("sweep: %w: %w\n%s", runErr, err, tail(sout, 2000))
	}
	log, _, err := mock.ReadLog(logPath)
	if err != nil {
		return nil, fmt.Errorf("the mock's log: %w", err)
	}
	mu := m.mu()
	a := sum.Answer
	steps := len(sum.Steps)
	f := figure{Name: m.name + ": steps of the search to its answer at 5% resolution", Goal: "<= 8 steps at 5% resolution", Command: cmd}
	var loads []string
	distinct := map[float64]bool{}
	for _, s := range sum.Steps {
		loads = append(loads, fmt.Sprintf("%.3g", s.Load.Value))
		distinct[s.Load.Value] = true
	}
	ran := fmt.Sprintf("%d steps at %d loads (speeds %s)", steps, len(distinct), strings.Join(loads, ", "))
	switch {
	case a == nil || !a.Found || a.Upper == 0:
		f.Value = ran + ", no bounded answer"
		f.Verdict = "**missed**: no bounded answer"
	default:
		f.Value = fmt.Sprintf("%s; answer %.1f conversations/s = %.2f mu (mu %.1f req/s), bounded by steps %d and %d, %.1f%% apart",
			ran, a.OfferedConvRate, a.OfferedConvRate/mu, mu, a.Lower, a.Upper, 100*a.Ratio)
		if stepAt(sum, a.Upper).Distorted {
			f.Value += " (the upper bound distorted by the client)"
		}
		if sum.Knee != nil {
			f.Value += fmt.Sprintf("; knee throughput %.1f req/s = %.2f mu", sum.Knee.Throughput, sum.Knee.Throughput/mu)
		}
		f.Verdict = atMost(float64(steps), 8, func(v float64) string { return fmt.Sprintf("%.0f steps", v) })
		if !a.Resolved {
			f.Verdict = "**missed**: the search stopped before its resolution"
		}
	}
	f.Note = fmt.Sprintf("TTFT p50 SLO %v (P + 2.5/mu), %d measured requests a step after %d warm-up, a load whose step the client distorted is run once more (--retry-distorted 1) and both count as steps; load average %s",
		m.ttftSLO(), sweepStepRequests, sweepWarmup, loadAvg())

	h := figure{Name: m.name + ": client health per step", Command: cmd,
		Goal: "each step's health in the summary; a distorted step is never the answer"}
	var parts []string
	distorted := 0
	for _, s := range sum.Steps {
		se, err := stampError(filepath.Join(out, s.Recording), log)
		if err != nil {
			return []figure{f}, err
		}
		if s.Distorted {
			distorted++
		}
		parts = append(parts, fmt.Sprintf("step %d (speed %.3g, %s): dispatch lag p99 %.2f ms, scheduler p99 %.2f ms, stamp error %s",
			s.Index, s.Load.Value, s.Verdict, s.DispatchLagP99Ms, s.SchedLatP99Ms, se))
	}
	h.Value = strings.Join(parts, "; ")
	switch {
	case a != nil && a.Found && stepAt(sum, a.Lower).Distorted:
		h.Verdict = "**missed**: the answer is a distorted step"
	default:
		h.Verdict = "met"
	}
	h.Note = fmt.Sprintf("%d of %d steps distorted (the client's dispatch lag, scheduler latency or send delay p99 above %v, or its CPU above %.0f%%); stamp error is calibrate's join of the step's recording with the mock's ground-truth log (client stamp - mock write time, loopback delivery included), measured requests and warm-up together",
		distorted, steps, sweep.DefaultMaxClientLag, 100*sweep.DefaultMaxClientCPU)
	return []figure{f, h}, nil
}

// stepAt is the step of index i (1-based, as the summary numbers them).
func stepAt(sum *sweep.Summary, i int) *sweep.StepResult {
	for k := range sum.Steps {
		if sum.Steps[k].Index == i {
			return &sum.Steps[k]
		}
	}
	return &sweep.StepResult{}
}

// stampError is calibrate's stamp error for one step: the step's
// recording joined with the mock log's entries that arrived during the
// step (the mock serves every step; request ids repeat from step to step).
func stampError(path string, log []mock.LogEntry) (string, error) {
	recs, meta, err := trace.ReadRecords(path)
	if err != nil {
		return "", err
	}
	var last int64
	for _, r := range recs {
		last = max(last, r.DoneNs)
	}
	from, to := meta.StartMonoNs, meta.StartMonoNs+last
	var step []mock.LogEntry
	for _, l := range log {
		if l.ArrivalMonoNs >= from && l.ArrivalMonoNs <= to {
			step = append(step, l)
		}
	}
	j := calibrate.Join(recs, meta.StartMonoNs, step, "c")
	if j.Matched() == 0 {
		return "not measured (no event matched)", nil
	}
	d := j.Diffs // sorted
	q := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))]) / 1e6
	}
	return fmt.Sprintf("p50 %.3f ms, p99 %.3f ms over %d events", q(0.5), q(0.99), len(d)), nil
}

// writeUniformTrace writes n one-turn conversations starting at constant
// gaps of 1/rate seconds, each asking for out tokens.
func writeUniformTrace(path string, n int, rate float64, out int) error {
	gap := time.Duration(float64(time.Second) / rate)
	turns := make([]trace.Turn, n)
	for i := range turns {
		at := int64(i) * int64(gap)
		id := fmt.Sprintf("c%04d", i)
		turns[i] = trace.Turn{ConversationID: id, StartOffsetNs: at, ArrivalOffsetNs: at,
			Messages:    []trace.Message{{Role: "user", Content: "capacity probe " + id, Tokens: 4}},
			InputTokens: 4, OutputTokens: int32(out)}
	}
	slices.SortFunc(turns, func(a, b trace.Turn) int { return int(a.StartOffsetNs - b.StartOffsetNs) })
	return trace.WriteTrace(path, trace.TraceMeta{TracekitVersion: trace.Version, Source: "bench", Tokenizer: "o200k_base"}, turns)
}
