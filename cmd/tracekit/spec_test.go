package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/sweep"
	"github.com/tracekit/tracekit/trace"
)

// readServerJSON reads the server section of an analyze --json file.
func readServerJSON(t *testing.T, path string) analyze.ServerReport {
	t.Helper()
	var js struct {
		Tracekit struct {
			Server analyze.ServerReport `json:"server"`
		} `json:"tracekit"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	return js.Tracekit.Server
}

// specTrace writes a trace of n single-turn conversations of out tokens.
func specTrace(t *testing.T, n, out int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.parquet")
	var turns []trace.Turn
	for c := range n {
		turns = append(turns, trace.Turn{ConversationID: fmt.Sprintf("c%d", c), OutputTokens: int32(out), InputTokens: 5,
			Messages: []trace.Message{{Role: "user", Content: "hello there", Tokens: 5}}})
	}
	if err := trace.WriteTrace(path, trace.TraceMeta{Tokenizer: "o200k_base", Source: "test"}, turns); err != nil {
		t.Fatal(err)
	}
	return path
}

// The mock's speculative mode, replayed with --scrape and analyzed: the
// acceptance figures from vLLM's counters equal the mock's own counts
// (the scrapes bracket the whole run), and the stream's tokens per decode
// event agree with the counters' mean acceptance length exactly: each
// step is one event of 1 + accepted tokens.
func TestSpecDecodeScrapeAndStreamAgree(t *testing.T) {
	const k, p = 4, 0.6
	srv := mocktest.Start(t, func(c *mock.Config) {
		c.Latency.DecodeBase = mock.Duration(2 * time.Millisecond)
		c.Latency.SpecK, c.Latency.SpecAccept = k, p
	})
	tr := specTrace(t, 12, 80)
	dir := t.TempDir()
	out := filepath.Join(dir, "run.parquet")
	args := append([]string{"replay", tr, "--target", srv.URL(), "-o", out, "--no-analyze", "--scrape", "--scrape-interval", "50ms", "--scrape-timeout", "10s"}, replayArgs...)
	if stdout, stderr, code := runCLI(t, args...); code != ExitOK {
		t.Fatalf("replay exit %d\n%s\n%s", code, stdout, stderr)
	}
	truth := srv.Stats()
	if truth.SpecDrafts == 0 || truth.SpecDraftTokens != k*truth.SpecDrafts {
		t.Fatalf("mock counts %+v: want drafts, each of %d tokens", truth, k)
	}
	// Every event after the first token is one step of 1 + accepted tokens.
	var steps, emitted int64
	for _, e := range srv.Log() {
		seen := false
		for _, n := range e.EventTokens {
			if n == 0 {
				continue
			}
			if seen {
				if n < 1 || n > k+1 {
					t.Fatalf("%s: an event of %d tokens, want 1..%d", e.RequestID, n, k+1)
				}
				steps++
				emitted += int64(n)
			}
			seen = true
		}
	}
	if steps != truth.SpecDrafts || emitted != truth.SpecDrafts+truth.SpecAcceptedTokens {
		t.Fatalf("log: %d steps emitting %d tokens; counters: %d drafts, %d accepted", steps, emitted, truth.SpecDrafts, truth.SpecAcceptedTokens)
	}

	jsonPath, htmlPath := filepath.Join(dir, "a.json"), filepath.Join(dir, "a.html")
	text, stderr, code := runCLI(t, "analyze", out, "--json", jsonPath, "--html", htmlPath)
	if code != ExitOK {
		t.Fatalf("analyze exit %d: %s", code, stderr)
	}
	if page, _ := os.ReadFile(htmlPath); !strings.Contains(string(page), "Spec mean acceptance length:") {
		t.Errorf("the HTML report lacks the speculative decoding figures")
	}
	sr := readServerJSON(t, jsonPath)
	if len(sr.Targets) != 1 || sr.Targets[0].Spec == nil {
		t.Fatalf("no speculative decoding figures: %+v", sr)
	}
	sp := sr.Targets[0].Spec
	if sp.Drafts == nil || sp.DraftTokens == nil || sp.AcceptedTokens == nil ||
		sp.Drafts.Increase != float64(truth.SpecDrafts) || sp.DraftTokens.Increase != float64(truth.SpecDraftTokens) ||
		sp.AcceptedTokens.Increase != float64(truth.SpecAcceptedTokens) {
		t.Fatalf("scraped counters %+v %+v %+v, the mock counted %+v", sp.Drafts, sp.DraftTokens, sp.AcceptedTokens, truth)
	}
	wantLen := 1 + float64(truth.SpecAcceptedTokens)/float64(truth.SpecDrafts)
	wantRate := float64(truth.SpecAcceptedTokens) / float64(truth.SpecDraftTokens)
	if sp.MeanAcceptanceLength == nil || math.Abs(*sp.MeanAcceptanceLength-wantLen) > 1e-12 ||
		sp.AcceptanceRate == nil || math.Abs(*sp.AcceptanceRate-wantRate) > 1e-12 {
		t.Fatalf("acceptance length %v rate %v, want %g and %g", sp.MeanAcceptanceLength, sp.AcceptanceRate, wantLen, wantRate)
	}
	// The stream's side, from the recording alone.
	if sp.StreamEvents != truth.SpecDrafts || sp.StreamTokensPerEvent == nil || math.Abs(*sp.StreamTokensPerEvent-wantLen) > 1e-12 {
		t.Fatalf("stream: %d decode events, %v tokens per event; the server: %d steps, mean length %g",
			sp.StreamEvents, sp.StreamTokensPerEvent, truth.SpecDrafts, wantLen)
	}
	// And the model: E[1 + accepted] = (1 - p^(k+1)) / (1 - p), a little
	// less where an output's end cuts a step short.
	if model := (1 - math.Pow(p, k+1)) / (1 - p); wantLen > model+0.3 || wantLen < model-0.5 {
		t.Errorf("mean acceptance length %g, the model's %g", wantLen, model)
	}
	for _, want := range []string{"Spec acceptance rate (%):", "Spec mean acceptance length:", "Stream tokens per decode event:"} {
		if !strings.Contains(text, want) {
			t.Errorf("analyze output lacks %q:\n%s", want, text)
		}
	}
}

// sweep --scrape against the speculative mock and a DCGM exporter: every
// step carries its acceptance figures, which the stream's tokens per
// event equal, and its energy in whole 4 J steps of the exporter's
// counters, with the per-token and per-request figures from the step's
// 16 requests of 16 tokens.
func TestSweepSpecDecodeAndEnergyPerStep(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	srv := mocktest.Start(t, func(c *mock.Config) {
		c.Latency.DecodeBase = mock.Duration(5 * time.Millisecond)
		c.Latency.SpecK, c.Latency.SpecAccept = 3, 0.7
	})
	tr := specTrace(t, 16, 16)
	dcgm := httptest.NewServer(&fakeDCGM{})
	defer dcgm.Close()
	out := filepath.Join(t.TempDir(), "sweep")
	args := []string{"sweep", tr, "--target", srv.URL(), "--out", out, "--max-concurrency", "1,8", "--step-requests", "16",
		"--ignore-eos", "--max-client-lag", "1s", "--max-client-cpu", "1", "--progress-every", "100ms", "--scrape", "--scrape-interval", "50ms", "--scrape-timeout", "10s",
		"--scrape-url", dcgm.URL + "/metrics"}
	stdout, stderr, code := runCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := sweep.ReadSummary(out)
	if err != nil || len(s.Steps) != 2 {
		t.Fatalf("sweep.json: %+v %v", s, err)
	}
	for _, st := range s.Steps {
		sv := st.Server
		if sv == nil || sv.SpecMeanAcceptanceLength == nil || sv.SpecAcceptanceRate == nil || sv.StreamTokensPerEvent == nil {
			t.Fatalf("step %d: no speculative decoding figures: %+v", st.Index, sv)
		}
		if math.Abs(*sv.SpecMeanAcceptanceLength-*sv.StreamTokensPerEvent) > 1e-12 || *sv.SpecMeanAcceptanceLength <= 1 {
			t.Errorf("step %d: mean acceptance length %g from the counters, %g tokens per event in the stream",
				st.Index, *sv.SpecMeanAcceptanceLength, *sv.StreamTokensPerEvent)
		}
		// With k = 3: 1 + accepted/drafts = 1 + 3 x accepted/draft tokens.
		if math.Abs(*sv.SpecMeanAcceptanceLength-(1+3**sv.SpecAcceptanceRate)) > 1e-12 {
			t.Errorf("step %d: length %g and rate %g disagree for k = 3", st.Index, *sv.SpecMeanAcceptanceLength, *sv.SpecAcceptanceRate)
		}
		step := (dcgmStepMJ[0] + dcgmStepMJ[1]) / 1e3
		if sv.EnergyJ == nil || *sv.EnergyJ < step || math.Abs(*sv.EnergyJ/step-math.Round(*sv.EnergyJ/step)) > 1e-9 {
			t.Fatalf("step %d: energy %v J, want whole steps of %g J", st.Index, sv.EnergyJ, step)
		}
		if sv.TokensPerJoule == nil || math.Abs(*sv.TokensPerJoule**sv.EnergyJ-16*16) > 1e-6 ||
			sv.JoulesPerRequest == nil || math.Abs(*sv.JoulesPerRequest*16-*sv.EnergyJ) > 1e-6 || sv.MeanPowerW == nil || *sv.MeanPowerW <= 0 {
			t.Errorf("step %d: per-token, per-request or power figures off: %+v", st.Index, sv)
		}
	}
	for _, want := range []string{"spec accept ", " tok/J, "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("sweep table lacks %q:\n%s", want, stdout)
		}
	}
}
