package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// --cancel-rate 0.1 over 1,000 requests: 10% +/- 3% are canceled
// mid-stream, recorded canceled_by_client and none as an error; the mock's
// own log shows each of them, and only them, closed by the client; analyze
// counts them apart from the failures; a rerun cancels the same requests.
//
// The mock takes about 300 ms per answer (5 ms a token), so a cancel 10-30
// ms after the send comes deep inside the stream even when a loaded
// machine runs the client or the mock late.
func TestCancelRate(t *testing.T) {
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
	srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(5 * time.Millisecond) })
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "1000", "--turns", "1", "--input-tokens", "8", "--output-tokens", "60",
		"--rate", "0", "--seed", "9", "-o", tr); code != ExitOK {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	canceled := func(name string) map[string]bool {
		seen := len(srv.Log())
		rec := filepath.Join(dir, name+".parquet")
		stdout, stderr, code := runCLI(t, "replay", tr, "--target", srv.URL(), "--ignore-eos", "--max-concurrency", "200",
			"--cancel-rate", "0.1", "--cancel-after", "10ms-30ms", "--max-error-rate", "0", "--progress", "none", "--no-analyze", "-o", rec)
		if code != ExitOK {
			t.Fatalf("replay: exit %d:\n%s\n%s", code, stdout, stderr)
		}
		got := map[string]bool{}
		recs, _, err := trace.ReadRecords(rec)
		if err != nil {
			t.Fatal(err)
		}
		whole := 0 // events of an answer read to its end
		for _, r := range recs {
			if r.ErrorKind == trace.ErrNone {
				whole = max(whole, len(r.EventNs))
			}
		}
		for _, r := range recs {
			switch r.ErrorKind {
			case trace.ErrCanceledByClient:
				got[r.RequestID] = true
				// A cancel can come after the last token and before the
				// stream's end: all of an answer's events, never more.
				if len(r.EventNs) > whole || !strings.Contains(r.ErrorMessage, "canceled by the client") {
					t.Errorf("%s canceled after %d events (a whole answer has %d): %q", r.RequestID, len(r.EventNs), whole, r.ErrorMessage)
				}
			case trace.ErrNone:
			default:
				t.Errorf("%s: %s %s", r.RequestID, r.ErrorKind, r.ErrorMessage)
			}
		}
		// The mock saw each close, unless it had written the whole answer
		// before the close reached it (then it logged ok: the client
		// closes after it decides, and a loaded machine can run that
		// late); that stays the exception. It saw no other request closed.
		finishedFirst := 0
		for _, e := range srv.Log()[seen:] {
			if !strings.HasPrefix(e.RequestID, "conv-") {
				continue
			}
			gone := e.Outcome == "client_gone"
			switch {
			case got[e.RequestID] && e.Outcome == "ok":
				finishedFirst++
			case got[e.RequestID] && !gone || !got[e.RequestID] && gone:
				t.Errorf("%s: the mock logged %q, replay canceled it: %v", e.RequestID, e.Outcome, got[e.RequestID])
			}
		}
		if finishedFirst > len(got)/2 {
			t.Errorf("the mock finished %d of the %d canceled answers before their close reached it", finishedFirst, len(got))
		}
		js := filepath.Join(dir, name+".json")
		if _, stderr, code := runCLI(t, "analyze", rec, "--json", js); code != ExitOK {
			t.Fatalf("analyze: exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(js)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Failed   int `json:"failed"`
			Tracekit struct {
				Failed           int `json:"failed"`
				CanceledByClient int `json:"canceled_by_client"`
			} `json:"tracekit"`
		}
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		if a.Tracekit.CanceledByClient != len(got) || a.Tracekit.Failed != 0 || a.Failed != len(got) {
			t.Errorf("analyze: %+v, want %d canceled apart from 0 failed (and vLLM's failed %d)", a, len(got), len(got))
		}
		return got
	}
	first := canceled("a")
	if n := len(first); n < 70 || n > 130 {
		t.Errorf("%d of 1000 canceled, want 10%% +/- 3%%", n)
	}
	second := canceled("b")
	for id := range first {
		if !second[id] {
			t.Errorf("%s canceled in the first run, not in the rerun", id)
		}
	}
}
