package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// A linear ramp from 1 to 50 starts/s over 60 s, from the command line:
// the trace's starts follow the ramp's cumulative rate (t + 49t²/120 by
// second t), and replay at --speed 30 intends every request exactly at its
// trace offset / 30.
func TestRateRampEndToEnd(t *testing.T) {
	srv := mocktest.Start(t, nil)
	dir := t.TempDir()
	tr, rec := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "r.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "1530", "--turns", "1", "--input-tokens", "4", "--output-tokens", "2",
		"--rate-ramp", "linear", "--rate-ramp-start", "1", "--rate", "50", "--rate-ramp-duration", "60s", "--burstiness", "1000000",
		"--seed", "3", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	turns := readTurns(t, tr)
	offset := map[string]int64{}
	for sec := 1; sec < 60; sec++ {
		n := 0
		for _, tu := range turns {
			if tu.ArrivalOffsetNs <= int64(sec)*1e9 {
				n++
			}
		}
		want := float64(sec) + 49*float64(sec*sec)/120
		if math.Abs(float64(n)-want) > 1.5 {
			t.Errorf("%d starts by %d s, want %.1f", n, sec, want)
		}
	}
	for _, tu := range turns {
		offset[tu.ConversationID] = tu.ArrivalOffsetNs
	}
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--timing", "trace", "--speed", "30", "--progress", "none", "--no-analyze", "-o", rec); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	recs := readRecords(t, rec)
	if len(recs) != len(turns) {
		t.Fatalf("%d records of %d turns", len(recs), len(turns))
	}
	var first int64 = math.MaxInt64
	for _, r := range recs {
		first = min(first, r.IntendedNs-offset[r.ConversationID]/30)
	}
	for _, r := range recs {
		if d := r.IntendedNs - offset[r.ConversationID]/30 - first; d < -1 || d > 1 {
			t.Fatalf("%s intended %d ns off its trace offset / 30", r.RequestID, d)
		}
	}
}

// vLLM's --ramp-up-strategy maps onto the ramp over the conversations, and
// half a ramp is refused naming what vLLM requires.
func TestFromVLLMRamp(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.parquet")
	cmd := "vllm bench serve --dataset-name random --random-input-len 8 --random-output-len 4 --num-prompts 50" +
		" --ramp-up-strategy exponential --ramp-up-start-rps 2 --ramp-up-end-rps 40 --seed 1"
	if _, stderr, code := runCLI(t, "synth", "--from-vllm", cmd, "-o", out); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	turns := readTurns(t, out)
	// exponential over the index: early gaps near 1/2 s, late ones near 1/40 s
	early := float64(turns[5].StartOffsetNs-turns[0].StartOffsetNs) / 5e9
	late := float64(turns[49].StartOffsetNs-turns[44].StartOffsetNs) / 5e9
	if early < 5*late {
		t.Errorf("mean gap %.3g s early, %.3g s late: want the rate to grow 20-fold", early, late)
	}
	_, stderr, code := runCLI(t, "synth", "--from-vllm", "vllm bench serve --dataset-name random --ramp-up-strategy linear --ramp-up-end-rps 9", "-o", filepath.Join(dir, "x.parquet"))
	if code != ExitUsage || !strings.Contains(stderr, "--ramp-up-start-rps") {
		t.Errorf("half a ramp: exit %d: %s", code, stderr)
	}
}

// --concurrency-ramp-duration opens the request slots one by one: at no
// time are more requests in flight (slot to done, from the recording)
// than the ramp had opened by then, the first stretch runs on few slots,
// and the run reaches all of --max-concurrency.
func TestConcurrencyRamp(t *testing.T) {
	srv := mocktest.Start(t, nil)
	dir := t.TempDir()
	tr, rec := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "r.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "300", "--turns", "1", "--input-tokens", "4", "--output-tokens", "30",
		"--rate", "0", "--seed", "3", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	const n, ramp = 8, int64(700e6)
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--ignore-eos", "--max-concurrency", "8", "--concurrency-ramp-duration", "700ms",
		"--progress", "none", "--no-analyze", "-o", rec); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	recs := readRecords(t, rec)
	maxIn := 0
	for _, at := range recs { // in flight just after each slot was taken
		in := 0
		for _, r := range recs {
			if r.SlotNs <= at.SlotNs && at.SlotNs < r.DoneNs {
				in++
			}
		}
		open := 1 + int((n-1)*min(at.SlotNs, ramp)/ramp) // the slots the ramp had opened by then, at most
		if in > open {
			t.Fatalf("%d requests in flight at %d ms, when the ramp had opened %d slots", in, at.SlotNs/1e6, open)
		}
		maxIn = max(maxIn, in)
	}
	if maxIn != n {
		t.Errorf("at most %d requests in flight, want the ramp to reach %d", maxIn, n)
	}
}
