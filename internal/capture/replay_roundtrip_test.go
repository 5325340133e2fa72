package capture_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/internal/replay"
	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// quickMock is the test mock with short answers: the proxy's clients ask
// for no length, so the mock draws one.
func quickMock(t *testing.T) *mock.Server {
	t.Helper()
	return mocktest.Start(t, func(c *mock.Config) { c.Latency.OutputMean = 5 })
}

// chatTurn sends one streaming chat request and returns the answer text.
func chatTurn(t *testing.T, base string, msgs []map[string]string) string {
	b, _ := json.Marshal(map[string]any{"model": "tracekit-mock", "messages": msgs, "stream": true, "max_tokens": 6})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var text strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(d), &c)
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return text.String()
}

// TestCapturedTraceReplays captures concurrent multi-turn users, replays
// the captured trace with tracekit replay against another mock, and checks
// that the replay reproduces the conversations, their turns, the
// conversation start gaps and the think times within 1 ms.
func TestCapturedTraceReplays(t *testing.T) {
	up := quickMock(t)
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: tokenizer.Default()}, "")
	if err != nil {
		t.Fatal(err)
	}
	const users, turns = 4, 3
	var wg sync.WaitGroup
	for u := range users {
		wg.Go(func() {
			time.Sleep(time.Duration(u) * 40 * time.Millisecond)
			msgs := []map[string]string{{"role": "user", "content": fmt.Sprintf("user %d asks 0", u)}}
			for k := range turns {
				ans := chatTurn(t, ps.URL(), msgs)
				msgs = append(msgs, map[string]string{"role": "assistant", "content": ans}, map[string]string{"role": "user", "content": fmt.Sprintf("user %d asks %d", u, k+1)})
				time.Sleep(time.Duration(20+10*u) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	seg := ps.Proxy().Segments()[0]

	target := quickMock(t)
	out := filepath.Join(t.TempDir(), "replayed.parquet")
	r, err := replay.New(replay.Config{Trace: seg.Trace, Targets: []string{target.URL()}, Model: "tracekit-mock", ContinuousUsage: "off", MaxConcurrency: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := record.NewRecorder(out, trace.RunMeta{}, record.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Run(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	rows := readTurns(t, seg.Trace)
	got := readRecs(t, out)
	if len(rows) != users*turns || len(got) != users*turns {
		t.Fatalf("captured %d turns, replayed %d requests; want %d", len(rows), len(got), users*turns)
	}
	type key struct {
		conv string
		turn int32
	}
	replayed := map[key]trace.Record{}
	for _, g := range got {
		if g.ErrorKind != "" {
			t.Fatalf("replayed request failed: %+v", g)
		}
		replayed[key{g.ConversationID, g.Turn}] = g
	}
	// The schedule is checked (conversation starts and think times within
	// 1 ms of the capture); actual send lag is a speed figure of this noisy
	// machine, logged. The very first request also pays for its connection.
	first := replayed[key{rows[0].ConversationID, 0}]
	t.Logf("first request sent %v after its intended time", time.Duration(first.SentNs-first.IntendedNs))
	const tol = int64(time.Millisecond)
	var maxLag int64
	defer func() { t.Logf("largest send lag after the first request: %v", time.Duration(maxLag)) }()
	for _, row := range rows {
		g, ok := replayed[key{row.ConversationID, row.Turn}]
		if !ok {
			t.Fatalf("captured %s turn %d was not replayed", row.ConversationID, row.Turn)
		}
		if row.Turn == 0 {
			if row.StartOffsetNs == 0 {
				continue
			}
			if d := g.IntendedNs - row.StartOffsetNs; d < -tol || d > tol {
				t.Errorf("%s scheduled at %v of the replay, started at %v of the capture", row.ConversationID, time.Duration(g.IntendedNs), time.Duration(row.StartOffsetNs))
			}
			maxLag = max(maxLag, g.SentNs-g.IntendedNs)
			continue
		}
		// The schedule must reproduce the captured think time; how late the
		// send then was is the dispatcher's lag under this machine's load
		// (a speed figure, logged, measured by replay's benchmarks).
		prev := replayed[key{row.ConversationID, row.Turn - 1}]
		think := g.IntendedNs - prev.DoneNs
		if d := think - row.ThinkTimeNs; d < -tol || d > tol {
			t.Errorf("%s turn %d: replay scheduled a think time of %v, captured %v", row.ConversationID, row.Turn, time.Duration(think), time.Duration(row.ThinkTimeNs))
		}
		maxLag = max(maxLag, g.SentNs-g.IntendedNs)
	}
}

// TestCapturedNonStreamingReplays captures a conversation whose second turn
// asks for one JSON body: the trace marks that turn non-streaming, and the
// captured trace still replays, both turns, in one conversation.
func TestCapturedNonStreamingReplays(t *testing.T) {
	up := quickMock(t)
	ps, err := capture.StartProxy(capture.ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: tokenizer.Default()}, "")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []map[string]string{{"role": "user", "content": "first, streamed"}}
	ans := chatTurn(t, ps.URL(), msgs)
	msgs = append(msgs, map[string]string{"role": "assistant", "content": ans}, map[string]string{"role": "user", "content": "second, one body"})
	b, _ := json.Marshal(map[string]any{"model": "tracekit-mock", "messages": msgs, "stream": false, "max_tokens": 6})
	resp, err := http.Post(ps.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	seg := ps.Proxy().Segments()[0]
	rows := readTurns(t, seg.Trace)
	if len(rows) != 2 || rows[0].NonStreaming || !rows[1].NonStreaming || rows[1].Turn != 1 || rows[1].ConversationID != rows[0].ConversationID {
		t.Fatalf("captured rows %+v; want turn 0 streaming and turn 1 non-streaming in one conversation", rows)
	}

	target := quickMock(t)
	out := filepath.Join(t.TempDir(), "replayed.parquet")
	r, err := replay.New(replay.Config{Trace: seg.Trace, Targets: []string{target.URL()}, Model: "tracekit-mock", ContinuousUsage: "off"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := record.NewRecorder(out, trace.RunMeta{}, record.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Run(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	got := readRecs(t, out)
	if len(got) != 2 {
		t.Fatalf("replayed %d requests, want 2", len(got))
	}
	for _, g := range got {
		if g.ErrorKind != "" || g.ConversationID != rows[0].ConversationID {
			t.Fatalf("replayed %+v", g)
		}
	}
}

func readTurns(t *testing.T, path string) []trace.Turn {
	rows, _, err := trace.ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func readRecs(t *testing.T, path string) []trace.Record {
	recs, _, err := trace.ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
