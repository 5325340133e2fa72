package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// The send-CPU stage: the client CPU a request costs
// at 30-40-turn histories, where a body is mostly history. Two measures:
// replay.BenchmarkBody40Turns (body building alone, per request of a
// 40-turn chat of about 80 KB at its last turn, the encoder of before,
// "reencode", beside the pre-encoded history, "preencoded"; the median of
// -count runs), and whole replays of 64 conversations of 36 turns (about
// 2 KB of history a turn) against a mock child: closed and open loop with
// the reference history, closed loop with the server's, whose client CPU
// per request is the recording's health CPU seconds over its requests.
// Beside them the rate of counting tokens, which a history of reference
// answers costs per turn (tokenizer.BenchmarkCount).

const (
	sendConvs = 64
	sendTurns = 36
)

var sendMockArgs = []string{"mock", "--listen", "127.0.0.1:0", "--prefill-base", "2ms", "--prefill-per-token", "0",
	"--decode-base", "1ms", "--decode-per-seq", "0", "--jitter-cv", "0", "--max-num-seqs", "4096"}

func sendReplayArgs(tr, url, out, timing, history string) []string {
	return []string{"replay", tr, "--target", url, "--timing", timing, "--history", history, "--max-concurrency", "64",
		"--continuous-usage", "off", "--model", "tracekit-mock", "--no-analyze", "--progress", "none", "--benchmark-timeout", "100s", "-o", out}
}

// sendTrace is the stage's trace: each turn a question of about 600
// bytes and a reference answer of about 1.5 KB, asking for out tokens;
// turns 1 ms of think time apart (closed loop) or 4 ms of arrival apart
// (open loop).
func sendTrace(out int32) []trace.Turn {
	q := strings.Repeat("please explain the \"next\" step of the plan in detail.\n", 11)
	a := strings.Repeat("The next step is to measure, then to change one thing at a time. ", 23)
	var turns []trace.Turn
	for c := range sendConvs {
		id, start := fmt.Sprintf("c%03d", c), int64(c)*int64(time.Millisecond)
		for k := range sendTurns {
			turns = append(turns, trace.Turn{ConversationID: id, Turn: int32(k), StartOffsetNs: start,
				ArrivalOffsetNs: start + int64(k)*int64(4*time.Millisecond), ThinkTimeNs: int64(time.Millisecond),
				Messages:        []trace.Message{{Role: "user", Content: fmt.Sprintf("%d: %s", k, q), Tokens: 120}},
				ReferenceAnswer: fmt.Sprintf("%d: %s", k, a), OutputTokens: out})
		}
	}
	return turns
}

func sendCPUBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Send CPU at 30-40-turn histories (pre-encoded history, bodies prepared ahead)"
	var figs []figure
	rows, cmd, err := goBench(ctx, e, "./internal/replay/", "Body40Turns", "-benchmem", "-benchtime", "200x", "-count", "5")
	if err != nil {
		return nil, err
	}
	med := func(name, metric string) (float64, float64, bool) {
		var v []float64
		var allocs float64
		for _, r := range rows {
			if r.Name == name {
				v = append(v, r.Metrics[metric])
				allocs = r.Metrics["allocs/op"]
			}
		}
		if len(v) == 0 {
			return 0, 0, false
		}
		slices.Sort(v)
		return v[len(v)/2], allocs, true
	}
	re, _, ok1 := med("BenchmarkBody40Turns/reencode", "ns/request")
	pre, allocs, ok2 := med("BenchmarkBody40Turns/preencoded", "ns/request")
	kb, _, _ := med("BenchmarkBody40Turns/preencoded", "kB-last")
	if ok1 && ok2 {
		figs = append(figs, figure{Section: sec, Name: "body building per request, 40-turn chat",
			Value:   fmt.Sprintf("%.1f us pre-encoded vs %.1f us re-encoding the history (%.1fx less), last body %.0f kB, %.0f allocs per conversation", pre/1e3, re/1e3, re/pre, kb, allocs),
			Command: cmd, Note: fmt.Sprintf("medians of 5 runs; load average %s", loadAvg())})
	}
	// Counting tokens (tokenizer.Count, o200k_base) of the answers the
	// history carries: the stage's reference answer, and ShareGPT's
	// answers when ../shared/data is there.
	trows, tcmd, err := goBench(ctx, e, "./internal/tokenizer/", "Count/o200k_base/(sendcpu-answer|sharegpt-en)$", "-benchtime", "1s", "-count", "3")
	if err != nil {
		return figs, err
	}
	tmed := func(name, metric string) float64 {
		var v []float64
		for _, r := range trows {
			if r.Name == name {
				v = append(v, r.Metrics[metric])
			}
		}
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	rate := func(name string) string {
		return fmt.Sprintf("%.1fM tokens/s (%.1f MB/s; %.1fM tokens per CPU second)", tmed(name, "tokens/s")/1e6, tmed(name, "MB/s"), tmed(name, "tokens/cpu-s")/1e6)
	}
	tv := rate("BenchmarkCount/o200k_base/sendcpu-answer") + " on the stage's reference answer"
	if tmed("BenchmarkCount/o200k_base/sharegpt-en", "tokens/s") > 0 {
		tv += ", " + rate("BenchmarkCount/o200k_base/sharegpt-en") + " on ShareGPT's answers"
	}
	figs = append(figs, figure{Section: sec, Name: "token counting, o200k_base (tokenizer.Count)", Value: tv, Command: tcmd,
		Note: fmt.Sprintf("medians of 3 runs; load average %s", loadAvg())})
	// The mock's answers are 300 tokens (about 1.5 KB, as the reference
	// answers) when the history is the server's.
	for _, run := range []struct {
		timing, history string
		out             int32
	}{{"closed", "reference", 8}, {"trace", "reference", 8}, {"closed", "actual", 300}} {
		base := fmt.Sprintf("sendcpu-%d.parquet", run.out)
		tr := filepath.Join(e.work, base)
		if err := trace.WriteTrace(tr, trace.TraceMeta{Tokenizer: "o200k_base", Source: "bench"}, sendTrace(run.out)); err != nil {
			return figs, err
		}
		url, stop, err := startMock(ctx, e.bin, sendMockArgs)
		if err != nil {
			return figs, err
		}
		rec := filepath.Join(e.work, "sendcpu-rec-"+run.timing+"-"+run.history+".parquet")
		la := loadAvg()
		wall, out, err := elapsed(exec.CommandContext(ctx, e.bin, sendReplayArgs(tr, url, rec, run.timing, run.history)...))
		stop()
		name := fmt.Sprintf("client CPU per request, %d conversations x %d turns, --timing %s --history %s", sendConvs, sendTurns, run.timing, run.history)
		cmd := "bin/tracekit " + shellJoin(sendMockArgs) + " &  bin/tracekit " + shellJoin(sendReplayArgs(base, "http://127.0.0.1:PORT", "recording.parquet", run.timing, run.history)) +
			"   # the trace is built by bench/sendcpu.go (go run ./bench -only 'send cpu')"
		if err != nil {
			figs = append(figs, figure{Section: sec, Name: name, Value: fmt.Sprintf("failed after %.1f s", wall.Seconds()), Verdict: "**missed**: " + firstLine(out), Command: cmd})
			continue
		}
		recs, meta, err := trace.ReadRecords(rec)
		if err != nil {
			return figs, err
		}
		errs := 0
		for _, r := range recs {
			if r.ErrorKind != "" {
				errs++
			}
		}
		var cpu float64
		if meta.Health != nil {
			cpu = meta.Health.CPUSeconds
		}
		figs = append(figs, figure{Section: sec, Name: name,
			Value:   fmt.Sprintf("%.0f us (%.2f CPU s over %d requests, %d errors)", cpu/float64(len(recs))*1e6, cpu, len(recs), errs),
			Command: cmd, Note: fmt.Sprintf("the replay process's user+sys CPU (the mock is a child of its own); load average %s before the run", la)})
	}
	return figs, nil
}
