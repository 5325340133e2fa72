package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/synth"
	"github.com/tracekit/tracekit/trace"
)

const sharedMooncake = "../../../shared/data/mooncake/conversation_trace.jsonl"

// A 15 s window of the real Mooncake trace (48 requests), imported by
// synth and replayed open-loop in real time against the mock, must send
// every request of the window at its source timestamp: the intended time
// equals the file's timestamp minus the window start exactly, and the
// actual send follows it closely. Every request is checked, so a longer
// window would prove nothing more; real time keeps the load per second of
// the trace itself (a faster --speed would measure this machine's CPU under
// -race, not the schedule). The lag bound here only catches a broken
// schedule (a request sent a whole gap late or early: the window averages
// over 300 ms between requests, and -race on a shared 2-core machine slows
// everything); the dispatch-lag goal itself is measured in make bench.
func TestMooncakeWindowReplaysOnSourceTimestamps(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a 15 s window")
	}
	if _, err := os.Stat(sharedMooncake); err != nil {
		t.Skip("shared Mooncake trace not present")
	}
	const start, window = 600 * time.Second, 15 * time.Second
	want := mooncakeOffsets(t, start, window)
	if len(want) < 40 {
		t.Fatalf("the window holds %d requests: too few to test a schedule", len(want))
	}

	src := &synth.Mooncake{Opts: synth.ImportOptions{Path: sharedMooncake, Start: start, Duration: window, MaxInputTokens: 2048}}
	path := filepath.Join(t.TempDir(), "mooncake.parquet")
	if _, err := synth.Generate(context.Background(), synth.Job{Source: src, Meta: trace.TraceMeta{Tokenizer: "o200k_base"}, Output: path}); err != nil {
		t.Fatal(err)
	}

	srv := mocktest.Start(t, nil)
	r, err := New(Config{Trace: path, Targets: []string{srv.URL()}, Timing: TimingTrace, IgnoreEOS: true, ContinuousUsage: "off"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*window)
	defer cancel()
	sink := &memSink{}
	if _, err := r.Run(ctx, sink); err != nil {
		t.Fatal(err)
	}

	var intended, lags []int64
	for _, rec := range sink.Records() {
		if rec.ErrorKind != "" {
			t.Errorf("%s: %s %s", rec.RequestID, rec.ErrorKind, rec.ErrorMessage)
		}
		intended = append(intended, rec.IntendedNs)
		lags = append(lags, rec.SentNs-rec.IntendedNs)
	}
	slices.Sort(intended)
	if !slices.Equal(intended, want) {
		t.Fatalf("intended send times differ from the source timestamps: %d sent, %d in the window", len(intended), len(want))
	}
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
	t.Logf("%d requests over %v: send lag p50 %v p99 %v max %v", len(lags), window, time.Duration(p50), time.Duration(p99), time.Duration(lags[len(lags)-1]))
	if lags[0] < 0 || p50 > int64(50*time.Millisecond) {
		t.Errorf("send lag min %v p50 %v: the schedule is broken", time.Duration(lags[0]), time.Duration(p50))
	}
}

// mooncakeOffsets reads the source file independently of synth: the
// timestamps (ms) in [start, start+window), as ns from the window start.
func mooncakeOffsets(t *testing.T, start, window time.Duration) []int64 {
	f, err := os.Open(sharedMooncake)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			Timestamp json.Number `json:"timestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		ms, err := strconv.ParseInt(row.Timestamp.String(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ts := time.Duration(ms) * time.Millisecond
		if ts >= start && ts < start+window {
			out = append(out, int64(ts-start))
		}
	}
	slices.Sort(out)
	return out
}
