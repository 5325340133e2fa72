package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// mock --models adds names with the base latency after the config's own
// models list: /v1/models lists them all, --model's first, and
// --strict-model still 404s a name not served.
func TestMockModelsFlag(t *testing.T) {
	bin := tracekitBinary(t)
	dir := t.TempDir()
	cfg, ready := filepath.Join(dir, "mock.json"), filepath.Join(dir, "ready.json")
	if err := os.WriteFile(cfg, []byte(`{"models":[{"name":"small","latency":{"decode_base":"2ms"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mock", "--listen", "127.0.0.1:0", "--ready-file", ready, "--config", cfg,
		"--model", "large", "--models", "lora-a,lora-b", "--strict-model")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
	}()
	var r mock.Ready
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) { // hang guard
		var err error
		if r, err = mock.ReadReadyFile(ready); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("%v:\n%s", err, out.String())
		}
	}
	resp, err := http.Get(r.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	if got := strings.Join(ids, ","); got != "large,small,lora-a,lora-b" {
		t.Fatalf("/v1/models lists %s, want large,small,lora-a,lora-b", got)
	}
	for model, want := range map[string]int{"lora-b": http.StatusOK, "other": http.StatusNotFound} {
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
		resp, err := http.Post(r.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("model %s: status %d, want %d", model, resp.StatusCode, want)
		}
	}
}
