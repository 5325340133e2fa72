package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// A --model-mix run against a mock serving two models, a slow one and a
// fast one: analyze's per-model section counts each model's requests as the
// trace split them, and each model's TTFT and ITL follow its latency
// setting (the fast model's below the slow one's: an ordering, not a time
// budget).
func TestPerModelAnalysis(t *testing.T) {
	dir := t.TempDir()
	srv := mocktest.Start(t, func(c *mock.Config) {
		c.Model = "large"
		c.Latency.PrefillBase, c.Latency.DecodeBase, c.Latency.JitterCV = mock.Duration(60*time.Millisecond), mock.Duration(20*time.Millisecond), 0
		c.Models = []mock.ModelConfig{{Name: "small", Latency: json.RawMessage(`{"prefill_base":"1ms","decode_base":"1ms"}`)}}
	})
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "40", "--turns", "1", "--input-tokens", "4", "--output-tokens", "6",
		"--model-mix", "small=1,large=1", "--rate", "0", "--seed", "3", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	split := map[string]int{}
	for _, tu := range readTurns(t, tr) {
		split[tu.Model]++
	}
	if split["small"] == 0 || split["large"] == 0 {
		t.Fatalf("trace split %v: want both models", split)
	}
	rec := filepath.Join(dir, "r.parquet")
	if _, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--max-concurrency", "8", "--progress", "none", "--no-analyze", "-o", rec); code != ExitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	js, htm := filepath.Join(dir, "a.json"), filepath.Join(dir, "a.html")
	out, stderr, code := runCLI(t, "analyze", rec, "--json", js, "--html", htm)
	if code != ExitOK {
		t.Fatalf("analyze: exit %d: %s", code, stderr)
	}
	for _, m := range []string{"small", "large"} {
		if !strings.Contains(out, " Model: "+m+" ") {
			t.Errorf("text report has no section for %s:\n%s", m, out)
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tracekit struct {
			Models map[string]analyze.ModelStats `json:"models"`
		} `json:"tracekit"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	ms := doc.Tracekit.Models
	for m, n := range split {
		if got := ms[m]; got.Requests != n || got.Completed != n || got.Failed != 0 {
			t.Errorf("%s: %d requests, %d completed, %d failed; the trace sent it %d", m, got.Requests, got.Completed, got.Failed, n)
		}
	}
	small, large := ms["small"], ms["large"]
	if !(small.TTFT.Median < large.TTFT.Median) || !(small.ITL.Median < large.ITL.Median) {
		t.Errorf("small model TTFT %.2f ms, ITL %.2f ms; large %.2f ms, %.2f ms: want the small model's below", small.TTFT.Median, small.ITL.Median, large.TTFT.Median, large.ITL.Median)
	}
	h, err := os.ReadFile(htm)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), "<h2>Model: small</h2>") || !strings.Contains(string(h), "<h2>Model: large</h2>") {
		t.Errorf("HTML report has no per-model sections")
	}
}
