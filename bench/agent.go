package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// The agentic-traffic stage: 1,000 sessions of a tool-calling
// agent graph (a root answered with a tool call, a 4-way fan-out of tool
// results, a join, a final step: 7 requests), replayed closed-loop against
// a fast mock child, beside a chat trace of the same request count (1,000
// conversations of 7 turns). Figures: sessions per second (completed
// sessions over the run's wall time), requests in flight (time-averaged:
// the sum of sent-to-done over the run span; and the peak), and client CPU
// per request (the recording's health CPU seconds over its requests).

const (
	agentSessions   = 1000
	agentFanOut     = 4
	agentStartEvery = 2 * time.Millisecond // sessions start 500 per second
	agentThink      = time.Millisecond
)

var agentMockArgs = []string{"mock", "--listen", "127.0.0.1:0", "--prefill-base", "2ms", "--prefill-per-token", "0",
	"--decode-base", "1ms", "--decode-per-seq", "0", "--jitter-cv", "0", "--max-num-seqs", "4096"}

func agentReplayArgs(tr, url, out string) []string {
	return []string{"replay", tr, "--target", url, "--max-concurrency", "256", "--continuous-usage", "off",
		"--model", "tracekit-mock", "--no-analyze", "--progress", "none", "--benchmark-timeout", "100s", "-o", out}
}

// agentTurns builds one session: 0 (tools, tool_choice required, one
// recorded call) -> 1..4 (tool results) -> 5 (join) -> 6.
func agentTurns(id string, start int64) []trace.Turn {
	user := func(s string) []trace.Message { return []trace.Message{{Role: "user", Content: s, Tokens: 8}} }
	root := trace.Turn{ConversationID: id, Turn: 0, StartOffsetNs: start, ArrivalOffsetNs: start, OutputTokens: 8,
		Messages: append([]trace.Message{{Role: "system", Content: "You are an agent with a search tool.", Tokens: 8}}, user("research the question in four parts")...),
		Tools:    `[{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]`, ToolChoice: `"required"`,
		ReferenceToolCalls: []trace.ToolCall{{ID: "call_0", Name: "search", Arguments: `{"text": "q"}`}}}
	turns := []trace.Turn{root}
	for k := int32(1); k <= agentFanOut; k++ {
		turns = append(turns, trace.Turn{ConversationID: id, Turn: k, StartOffsetNs: start, Parents: []int32{0}, ThinkTimeNs: int64(agentThink), OutputTokens: 8,
			Messages: []trace.Message{{Role: "tool", Content: fmt.Sprintf("result of part %d: some text found", k), ToolCallID: "call_0", Tokens: 8}}})
	}
	turns = append(turns,
		trace.Turn{ConversationID: id, Turn: agentFanOut + 1, StartOffsetNs: start, Parents: []int32{1, 2, 3, 4}, ThinkTimeNs: int64(agentThink), OutputTokens: 16, Messages: user("combine the four parts")},
		trace.Turn{ConversationID: id, Turn: agentFanOut + 2, StartOffsetNs: start, Parents: []int32{agentFanOut + 1}, ThinkTimeNs: int64(agentThink), OutputTokens: 16, Messages: user("now the final answer")})
	return turns
}

// chatTurns is a chat of the same length and sizes.
func chatTurns(id string, start int64) []trace.Turn {
	turns := agentTurns(id, start)
	for k := range turns {
		turns[k].Parents, turns[k].Tools, turns[k].ToolChoice, turns[k].ReferenceToolCalls = nil, "", "", nil
		for m := range turns[k].Messages {
			if turns[k].Messages[m].Role == "tool" {
				turns[k].Messages[m].Role, turns[k].Messages[m].ToolCallID = "user", ""
			}
		}
	}
	return turns
}

func agentBench(ctx context.Context, e *env) ([]figure, error) {
	const sec = "Agentic traffic (1,000 sessions of 7 requests: tool call, 4-way fan-out, join; closed loop, --max-concurrency 256)"
	var figs []figure
	for _, kind := range []string{"agent graph", "chat"} {
		var turns []trace.Turn
		for s := range agentSessions {
			id, start := fmt.Sprintf("s%04d", s), int64(s)*int64(agentStartEvery)
			if kind == "chat" {
				turns = append(turns, chatTurns(id, start)...)
			} else {
				turns = append(turns, agentTurns(id, start)...)
			}
		}
		tr := filepath.Join(e.work, "agent-"+map[string]string{"chat": "chat", "agent graph": "graph"}[kind]+".parquet")
		if err := trace.WriteTrace(tr, trace.TraceMeta{Tokenizer: "o200k_base", Source: "bench"}, turns); err != nil {
			return figs, err
		}
		url, stop, err := startMock(ctx, e.bin, agentMockArgs)
		if err != nil {
			return figs, err
		}
		rec := filepath.Join(e.work, "agent-rec-"+filepath.Base(tr))
		wall, out, err := elapsed(exec.CommandContext(ctx, e.bin, agentReplayArgs(tr, url, rec)...))
		stop()
		cmd := "bin/tracekit " + shellJoin(agentMockArgs) + " &  bin/tracekit " + shellJoin(agentReplayArgs(filepath.Base(tr), "http://127.0.0.1:PORT", "recording.parquet")) +
			"   # the trace is built by bench/agent.go (go run ./bench -only agent)"
		if err != nil {
			figs = append(figs, figure{Section: sec, Name: kind, Value: fmt.Sprintf("failed after %.1f s", wall.Seconds()), Verdict: "**missed**: " + firstLine(out), Command: cmd})
			continue
		}
		f, err := agentFigures(rec, kind, len(turns))
		if err != nil {
			return figs, err
		}
		for i := range f {
			f[i].Section, f[i].Command = sec, cmd
		}
		figs = append(figs, f...)
	}
	return figs, nil
}

// agentFigures reads a recording back into the stage's figures.
func agentFigures(path, kind string, want int) ([]figure, error) {
	recs, meta, err := trace.ReadRecords(path)
	if err != nil {
		return nil, err
	}
	type ev struct {
		t     int64
		delta int
	}
	var evs []ev
	var busy, first, last int64
	first = -1
	errs := 0
	sessions := map[string]bool{}
	for _, r := range recs {
		if r.ErrorKind != "" {
			errs++
			sessions[r.ConversationID] = false
		} else if _, seen := sessions[r.ConversationID]; !seen {
			sessions[r.ConversationID] = true
		}
		busy += r.DoneNs - r.SentNs
		if first < 0 || r.IntendedNs < first {
			first = r.IntendedNs
		}
		last = max(last, r.DoneNs)
		evs = append(evs, ev{r.SentNs, 1}, ev{r.DoneNs, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.t != b.t {
			return int(min(max(a.t-b.t, -1), 1))
		}
		return a.delta - b.delta
	})
	cur, peak := 0, 0
	for _, x := range evs {
		cur += x.delta
		peak = max(peak, cur)
	}
	ok := 0
	for _, v := range sessions {
		if v {
			ok++
		}
	}
	span := float64(last-first) / 1e9
	var cpu float64
	if meta.Health != nil {
		cpu = meta.Health.CPUSeconds
	}
	unit := "sessions"
	if kind == "chat" {
		unit = "conversations"
	}
	return []figure{
		{Name: kind + ": " + unit + " per second", Value: fmt.Sprintf("%.1f/s (%d of %d %s ok, %d of %d requests recorded, %d errors, span %.2f s)",
			float64(ok)/span, ok, agentSessions, unit, len(recs), want, errs, span)},
		{Name: kind + ": requests in flight", Value: fmt.Sprintf("%.1f time-averaged, peak %d", float64(busy)/1e9/span, peak)},
		{Name: kind + ": client CPU per request", Value: fmt.Sprintf("%.0f us (%.2f CPU s over %d requests)", cpu/float64(len(recs))*1e6, cpu, len(recs))},
	}, nil
}
