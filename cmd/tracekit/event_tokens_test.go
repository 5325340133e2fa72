package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// Tokens per decode event, from the recording alone, against the mock's
// log of what it sent: with speculative decoding (k = 3 draft tokens, each
// accepted with p = 0.7) each decode event carries 1 + its accepted
// tokens, and analyze's counts by tokens carried equal the log's, in
// text, JSON and HTML; without it every decode event carries one token.
func TestTokensPerEventAgainstMockLog(t *testing.T) {
	tr := specTrace(t, 10, 40)
	for _, c := range []struct {
		name    string
		k       int
		p       float64
		wantMax int32
	}{{"speculative", 3, 0.7, 4}, {"plain", 0, 0, 1}} {
		t.Run(c.name, func(t *testing.T) {
			srv := mocktest.Start(t, func(cfg *mock.Config) {
				cfg.Latency.DecodeBase = mock.Duration(time.Millisecond)
				cfg.Latency.SpecK, cfg.Latency.SpecAccept = c.k, c.p
			})
			dir := t.TempDir()
			out := filepath.Join(dir, "run.parquet")
			args := append([]string{"replay", tr, "--target", srv.URL(), "-o", out, "--no-analyze"}, replayArgs...)
			if stdout, stderr, code := runCLI(t, args...); code != ExitOK {
				t.Fatalf("replay exit %d\n%s\n%s", code, stdout, stderr)
			}
			// The log: every event after a request's first token-carrying one.
			want := map[int32]int64{}
			var events, tokens int64
			for _, e := range srv.Log() {
				seen := false
				for _, n := range e.EventTokens {
					if n == 0 {
						continue
					}
					if seen {
						want[int32(n)]++
						events++
						tokens += int64(n)
					}
					seen = true
				}
			}
			if events == 0 {
				t.Fatal("the mock's log holds no decode event")
			}
			js, htm := filepath.Join(dir, "a.json"), filepath.Join(dir, "a.html")
			text, stderr, code := runCLI(t, "analyze", out, "--json", js, "--html", htm)
			if code != ExitOK {
				t.Fatalf("analyze exit %d: %s", code, stderr)
			}
			var doc struct {
				Tracekit struct {
					TokensPerEvent *analyze.EventTokens `json:"tokens_per_event"`
				} `json:"tracekit"`
			}
			b, err := os.ReadFile(js)
			if err != nil || json.Unmarshal(b, &doc) != nil {
				t.Fatalf("reading %s: %v", js, err)
			}
			e := doc.Tracekit.TokensPerEvent
			if e == nil {
				t.Fatalf("no tokens_per_event in the JSON")
			}
			got := map[int32]int64{}
			for _, c := range e.Counts {
				got[c.Tokens] = c.Events
			}
			if len(got) != len(want) {
				t.Errorf("counts by tokens %v, the log's %v", got, want)
			}
			for n, k := range want {
				if got[n] != k {
					t.Errorf("events of %d tokens: %d, the log sent %d", n, got[n], k)
				}
			}
			if e.Events != events || e.Tokens != tokens || math.Abs(e.Mean-float64(tokens)/float64(events)) > 1e-12 || e.Max > c.wantMax {
				t.Errorf("%d events, %d tokens, mean %g, max %d; the log: %d events, %d tokens (max %d allowed)",
					e.Events, e.Tokens, e.Mean, e.Max, events, tokens, c.wantMax)
			}
			if c.k > 0 && e.Max < 2 {
				t.Errorf("speculative decoding, yet no event carried more than one token: %+v", e)
			}
			if !strings.Contains(text, "Tokens per decode event:") || !strings.Contains(text, "Decode events by tokens carried:") {
				t.Errorf("analyze's text lacks the tokens per event:\n%s", text)
			}
			if page, _ := os.ReadFile(htm); !strings.Contains(string(page), `id="tokens-per-event"`) {
				t.Errorf("the HTML report lacks the tokens per event table")
			}
		})
	}
}
