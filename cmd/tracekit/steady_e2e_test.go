package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/analyze"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
)

// A run that ramps its concurrency up over 700 ms, holds 8 in flight and
// drains: analyze's steady window starts only once the ramp had opened
// enough slots for its threshold, its slices show the ramp below the
// window's load, and --window steady analyzes the requests sent in it.
func TestSteadyWindowOfRampedRun(t *testing.T) {
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
	type doc struct {
		Tracekit struct {
			Requests         int                     `json:"requests"`
			ExcludedByWindow int                     `json:"excluded_by_window"`
			Steady           *analyze.SteadyState    `json:"steady_state"`
			Slices           []analyze.WindowFigures `json:"slices"`
		} `json:"tracekit"`
	}
	analyzeJSON := func(name string, args ...string) (doc, string) {
		js := filepath.Join(dir, name)
		out, stderr, code := runCLI(t, append([]string{"analyze", rec, "--json", js}, args...)...)
		if code != ExitOK {
			t.Fatalf("analyze %v: exit %d: %s", args, code, stderr)
		}
		b, err := os.ReadFile(js)
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		return d, out
	}
	whole, out := analyzeJSON("whole.json", "--slices", "200ms")
	st := whole.Tracekit.Steady
	if st == nil {
		t.Fatalf("no steady window:\n%s", out)
	}
	if st.PeakInFlight < 1 || st.PeakInFlight > n {
		t.Fatalf("peak in flight %d, want 1..%d", st.PeakInFlight, n)
	}
	// Before the ramp had opened MinInFlight slots, fewer were in flight.
	if opened := ramp * int64(st.MinInFlight-1) / (n - 1); st.FromNs < opened {
		t.Errorf("steady window starts at %d ms, before the ramp had opened %d slots (%d ms)", st.FromNs/1e6, st.MinInFlight, opened/1e6)
	}
	if st.MeanInFlight < float64(st.MinInFlight) {
		t.Errorf("steady window's mean in flight %.2f below its threshold %d", st.MeanInFlight, st.MinInFlight)
	}
	sl := whole.Tracekit.Slices
	if len(sl) < 2 {
		t.Fatalf("%d slices", len(sl))
	}
	sent := 0
	for _, w := range sl {
		sent += w.Sent
	}
	if sent != whole.Tracekit.Requests {
		t.Errorf("slices hold %d requests sent, the run %d", sent, whole.Tracekit.Requests)
	}
	if sl[0].MeanInFlight >= st.MeanInFlight {
		t.Errorf("first slice's mean in flight %.2f, not below the steady window's %.2f: the ramp does not show", sl[0].MeanInFlight, st.MeanInFlight)
	}
	for _, want := range []string{"Steady state", "Steady window:", "Load slices (200ms)"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q", want)
		}
	}

	steady, out := analyzeJSON("steady.json", "--window", "steady")
	s := steady.Tracekit
	if s.Requests != st.Sent || s.Requests+s.ExcludedByWindow != whole.Tracekit.Requests {
		t.Errorf("--window steady: %d requests (+%d outside), want the window's %d of %d", s.Requests, s.ExcludedByWindow, st.Sent, whole.Tracekit.Requests)
	}
	if !strings.Contains(out, "(window steady ") {
		t.Errorf("text report does not name the steady window:\n%s", out)
	}
}
