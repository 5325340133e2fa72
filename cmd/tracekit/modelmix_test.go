package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// --model-mix over 2,000 conversations gives each model its share within
// 2%, one model per conversation (every turn), the same split on a rerun;
// replay sends and records each request's model.
func TestModelMix(t *testing.T) {
	dir := t.TempDir()
	want := map[string]float64{"base": 0.5, "lora-a": 0.3, "lora-b": 0.2}
	split := func(name string) map[string]string {
		tr := filepath.Join(dir, name)
		if _, stderr, code := runCLI(t, "synth", "--conversations", "2000", "--turns", "2", "--input-tokens", "4", "--output-tokens", "2",
			"--model-mix", "base=0.5,lora-a=0.3,lora-b=0.2", "--rate", "0", "--seed", "5", "-o", tr); code != ExitOK {
			t.Fatalf("synth: exit %d: %s", code, stderr)
		}
		conv := map[string]string{}
		for _, tu := range readTurns(t, tr) {
			if m, ok := conv[tu.ConversationID]; ok && m != tu.Model {
				t.Fatalf("%s: turns on %q and %q", tu.ConversationID, m, tu.Model)
			}
			conv[tu.ConversationID] = tu.Model
		}
		return conv
	}
	conv := split("a.parquet")
	n := map[string]int{}
	for _, m := range conv {
		n[m]++
	}
	for m, share := range want {
		if got := float64(n[m]) / 2000; math.Abs(got-share) > 0.02 {
			t.Errorf("%s: %.3f of the conversations, want %.2f +/- 0.02", m, got, share)
		}
	}
	if len(n) != 3 {
		t.Errorf("models %v", n)
	}
	again := split("b.parquet")
	for c, m := range conv {
		if again[c] != m {
			t.Fatalf("%s: %s, then %s on a rerun", c, m, again[c])
		}
	}

	srv := mocktest.Start(t, nil)
	small := filepath.Join(dir, "small.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "30", "--turns", "1", "--input-tokens", "4", "--output-tokens", "2",
		"--model-mix", "base=1,lora-a=1", "--rate", "0", "--seed", "5", "-o", small); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	rec := filepath.Join(dir, "r.parquet")
	if _, stderr, code := runCLI(t, "replay", small, "--target", srv.URL(), "--progress", "none", "--no-analyze", "-o", rec); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	sent := map[string]string{}
	for _, e := range srv.Log() {
		sent[e.RequestID] = e.Model
	}
	models := map[string]bool{}
	for _, r := range readRecords(t, rec) {
		if r.Model == "" || sent[r.RequestID] != r.Model {
			t.Errorf("%s: recorded model %q, the mock saw %q", r.RequestID, r.Model, sent[r.RequestID])
		}
		models[r.Model] = true
	}
	if len(models) != 2 {
		t.Errorf("models recorded: %v", models)
	}
}
