package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// inspect prints a trace's burstiness as the gamma shape synth drew it
// with, on the trace's own scale and per replay second at --speed, and
// durations in units.
func TestInspectBurstinessAndSpeed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.parquet")
	if _, stderr, code := runCLI(t, "synth", "--conversations", "6000", "--turns", "1", "--input-tokens", "5", "--output-tokens", "5",
		"--rate", "50", "--burstiness", "0.25", "--seed", "3", "-o", out); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	rate := regexp.MustCompile(`conversation starts ([0-9.]+)/s over (\S+)`)
	shape := regexp.MustCompile(`gamma shape ([0-9.]+); dispersion index ([0-9.]+) per (\S+) \(10 mean gaps\), ([0-9.na/]+) per second`)
	var rates []float64
	for _, speed := range []string{"1", "10"} {
		stdout, stderr, code := runCLI(t, "inspect", "--speed", speed, out)
		if code != 0 {
			t.Fatalf("inspect: exit %d: %s", code, stderr)
		}
		m, b := rate.FindStringSubmatch(stdout), shape.FindStringSubmatch(stdout)
		if m == nil || b == nil {
			t.Fatalf("speed %s: no rate or burstiness line:\n%s", speed, stdout)
		}
		r, _ := strconv.ParseFloat(m[1], 64)
		rates = append(rates, r)
		k, _ := strconv.ParseFloat(b[1], 64)
		own, _ := strconv.ParseFloat(b[2], 64)
		// 5,999 gamma gaps of shape 0.25: the moment estimate is within
		// 20%; counts over 10 gaps have a dispersion index well above 1.
		if k < 0.2 || k > 0.3 || own < 2 {
			t.Errorf("speed %s: shape %g, own-scale dispersion %g; want 0.25 and bursty (>2)\n%s", speed, k, own, stdout)
		}
		if !regexp.MustCompile(`^[0-9.]+(ms|s)$`).MatchString(b[3]) || !regexp.MustCompile(`^[0-9hms.]+$`).MatchString(m[2]) {
			t.Errorf("speed %s: durations %q %q not in units", speed, b[3], m[2])
		}
		if speed == "10" && !regexp.MustCompile(`over \S+ at --speed 10`).MatchString(stdout) {
			t.Errorf("speed 10 not said:\n%s", stdout)
		}
	}
	if rates[1] < 9.9*rates[0] || rates[1] > 10.1*rates[0] {
		t.Errorf("rates %v: --speed 10 should multiply the rate by 10", rates)
	}
	if _, stderr, code := runCLI(t, "inspect", "--speed", "0", out); code != 2 {
		t.Errorf("--speed 0: exit %d %s", code, stderr)
	}
}

// inspect reads a virtual trace: its token counts are the import's, and it
// says the prompts are virtual; --prompt-text gives the same counts.
func TestInspectVirtualTrace(t *testing.T) {
	dir := t.TempDir()
	var stats []string
	for i, extra := range [][]string{nil, {"--prompt-text"}} {
		out := filepath.Join(dir, strconv.Itoa(i)+".parquet")
		args := append([]string{"synth", "--source", "mooncake", "--input", "testdata/synth/mooncake.jsonl", "-o", out}, extra...)
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Fatalf("synth: exit %d: %s", code, stderr)
		}
		stdout, stderr, code := runCLI(t, "inspect", out)
		if code != 0 {
			t.Fatalf("inspect: exit %d: %s", code, stderr)
		}
		m := regexp.MustCompile(`input tokens/turn +(.+)`).FindStringSubmatch(stdout)
		virtual := regexp.MustCompile(`virtual prompts +blocktext.default under o200k_base, 512-token blocks`).MatchString(stdout)
		if m == nil || virtual != (extra == nil) {
			t.Fatalf("inspect of %v (virtual line %v):\n%s", extra, virtual, stdout)
		}
		stats = append(stats, m[1])
	}
	if stats[0] != stats[1] {
		t.Fatalf("input tokens: virtual %q, text %q", stats[0], stats[1])
	}
}
