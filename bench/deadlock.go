package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// The deadlock scenario: conversations of 30-40 turns whose
// history grows to 30-80 KB, all starting at once, replayed at a
// concurrency far below and far above their number. vLLM's multi-turn
// benchmark hangs on this shape; tracekit must complete it.
var deadlockConcurrency = []int{2, 100, 2000}

// deadlockSynthArgs makes the trace: ~340 tokens (~1.4 KB) of new user text
// per turn over 30-40 turns, plus 16-token answers carried as history.
func deadlockSynthArgs(convs int, out string) []string {
	return []string{"synth", "--conversations", fmt.Sprint(convs), "--turns", "30-40", "--input-tokens", "220-460",
		"--output-tokens", "16", "--seed", "1", "-o", out}
}

// deadlockMockArgs is a fast mock: the scenario tests the client's
// bookkeeping, not the model's speed.
var deadlockMockArgs = []string{"mock", "--listen", "127.0.0.1:0", "--prefill-base", "200us", "--prefill-per-token", "0",
	"--decode-base", "100us", "--decode-per-seq", "0", "--jitter-cv", "0", "--max-num-seqs", "4096"}

func deadlockReplayArgs(tr, url, out string, conc int, limit time.Duration) []string {
	return []string{"replay", tr, "--target", url, "--max-concurrency", fmt.Sprint(conc), "--ignore-eos",
		"--continuous-usage", "off", "--model", "tracekit-mock", "--no-analyze", "--progress", "none",
		"--idle-timeout", "30s", "--benchmark-timeout", limit.Round(time.Second).String(), "-o", out}
}

func deadlockBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Deadlock scenario (30-40 turns, 30-80 KB history, all conversations start at once)"
	n := e.deadlockConvs
	scale := "full size"
	if n != 2000 {
		scale = fmt.Sprintf("scaled to %d conversations (full size: 2,000; run `go run ./bench -deadlock-conversations 2000 -only deadlock -o /tmp/deadlock.md`)", n)
	}
	tr := filepath.Join(e.work, "deadlock.parquet")
	synthArgs := deadlockSynthArgs(n, "deadlock.parquet")
	t, out, err := elapsed(exec.CommandContext(ctx, e.bin, deadlockSynthArgs(n, tr)...))
	if err != nil {
		return nil, fmt.Errorf("synth: %w\n%s", err, tail(out, 2000))
	}
	turns, hist, err := historySizes(tr)
	if err != nil {
		return nil, err
	}
	figs := []figure{{Section: sec, Name: fmt.Sprintf("trace: %d conversations, %d turns (%s)", n, turns, scale),
		Value:   fmt.Sprintf("written in %.2f s; user history per conversation %d-%d KB (median %d KB) before answers", t.Seconds(), hist[0]>>10, hist[len(hist)-1]>>10, hist[len(hist)/2]>>10),
		Command: "bin/tracekit " + shellJoin(synthArgs)}}
	for i, conc := range deadlockConcurrency {
		// Concurrency 2 is the slowest by far: it gets half of what is left.
		left := time.Until(deadlineOf(ctx))
		limit := left / time.Duration(len(deadlockConcurrency)-i)
		if i == 0 {
			limit = left / 2
		}
		f, err := deadlockRun(ctx, e, tr, turns, conc, limit)
		f.Section = sec
		figs = append(figs, f)
		if err != nil {
			return figs, err
		}
	}
	return figs, nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Hour)
	}
	return d
}

// deadlockRun replays the trace at one concurrency against a fresh mock
// child, bounded by limit, and checks every request was recorded without
// error.
func deadlockRun(ctx context.Context, e *env, tr string, turns, conc int, limit time.Duration) (figure, error) {
	name := fmt.Sprintf("concurrency %d", conc)
	url, stop, err := startMock(ctx, e.bin, deadlockMockArgs)
	if err != nil {
		return figure{Name: name}, err
	}
	defer stop()
	rec := filepath.Join(e.work, fmt.Sprintf("deadlock-c%d.parquet", conc))
	args := deadlockReplayArgs(tr, url, rec, conc, max(limit-10*time.Second, 10*time.Second))
	cmd := "bin/tracekit " + shellJoin(deadlockMockArgs) + " &  bin/tracekit " +
		shellJoin(deadlockReplayArgs("deadlock.parquet", "http://127.0.0.1:PORT", "recording.parquet", conc, 10*time.Minute))
	e.logf("  replay at concurrency %d (limit %v)", conc, limit.Round(time.Second))
	wall, out, err := elapsed(exec.CommandContext(ctx, e.bin, args...))
	f := figure{Name: name, Command: cmd, Goal: "completes"}
	if err != nil {
		f.Value, f.Verdict = fmt.Sprintf("failed after %.1f s", wall.Seconds()), "**missed**: "+firstLine(out)
		return f, nil
	}
	n, errs, err := countRecords(rec)
	if err != nil {
		return f, err
	}
	f.Value = fmt.Sprintf("%d of %d requests recorded, %d errors, wall %.1f s (%.0f req/s)", n, turns, errs, wall.Seconds(), float64(n)/wall.Seconds())
	if n == turns && errs == 0 {
		f.Verdict = "met"
	} else {
		f.Verdict = fmt.Sprintf("**missed**: %d requests missing, %d errors (benchmark timeout %v)", turns-n, errs, limit.Round(time.Second))
	}
	return f, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// startMock runs `tracekit mock` until stop, returning its URL.
func startMock(ctx context.Context, bin string, args []string) (string, func(), error) {
	url, _, stop, err := startMockPID(ctx, bin, args)
	return url, stop, err
}

// startMockPID is startMock that also returns the child's process id.
func startMockPID(ctx context.Context, bin string, args []string) (string, int, func(), error) {
	c := exec.CommandContext(ctx, bin, args...)
	stdout, err := c.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	c.Stderr = io.Discard
	if err := c.Start(); err != nil {
		return "", 0, nil, err
	}
	urls := make(chan string, 1)
	go func() { // ends at the child's stdout EOF
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "http://"); i >= 0 {
				select {
				case urls <- strings.TrimSpace(sc.Text()[i:]):
				default:
				}
			}
		}
	}()
	stop := func() {
		c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
	select {
	case u := <-urls:
		return u, c.Process.Pid, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return "", 0, nil, errors.New("the mock printed no URL within 30 s")
	}
}

// historySizes returns the trace's turn count and, per conversation, the
// bytes of its messages (the history the last turn carries, answers aside),
// sorted.
func historySizes(path string) (int, []int, error) {
	r, err := trace.OpenTrace(path)
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	per := map[string]int{}
	rows := make([]trace.Turn, 1024)
	turns := 0
	for {
		n, err := r.Read(rows)
		for _, t := range rows[:n] {
			turns++
			for _, m := range t.Messages {
				per[t.ConversationID] += len(m.Content)
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return 0, nil, err
		}
	}
	var sizes []int
	for _, v := range per {
		sizes = append(sizes, v)
	}
	slices.Sort(sizes)
	if len(sizes) == 0 {
		return 0, nil, fmt.Errorf("%s: empty trace", path)
	}
	return turns, sizes, nil
}

// countRecords returns the rows of a recording and how many failed.
func countRecords(path string) (int, int, error) {
	r, err := trace.OpenRecording(path)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	rows := make([]trace.Record, 1024)
	n, errs := 0, 0
	for {
		k, err := r.Read(rows)
		for _, rec := range rows[:k] {
			n++
			if rec.ErrorKind != trace.ErrNone {
				errs++
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && k == 0) {
			return n, errs, nil
		}
		if err != nil {
			return n, errs, err
		}
	}
}
