package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var updateSynthGolden = flag.Bool("update-synth-golden", false, "rewrite testdata/synth/golden.txt from the current synth")

// synthGoldenCases are command lines of every source and the options that
// shape a trace. Inputs are relative paths: they are recorded in the
// metadata, so they must not depend on a temporary directory.
var synthGoldenCases = []struct {
	name string
	args []string
}{
	{"synthetic", []string{"--conversations", "5", "--turns", "2-4", "--input-tokens", "20-60", "--output-tokens", "5-20",
		"--rate", "2", "--burstiness", "0.5", "--think-time", "exponential:mean=2s", "--prefix-tokens", "10-30",
		"--common-prefix-tokens", "15", "--seed", "11"}},
	{"synthetic-textfile", []string{"--conversations", "3", "--turns", "3", "--input-tokens", "lognormal:average=40,max=80",
		"--output-tokens", "zipf:alpha=1.5,max=30", "--text-file", "testdata/synth/text.txt", "--tokenizer", "cl100k_base",
		"--rate", "0", "--seed", "4"}},
	{"config", []string{"--config", "testdata/synth/multi_turn.json", "--turns", "3", "--token-time", "5ms", "--seed", "2"}},
	{"sharegpt-json", []string{"--source", "sharegpt", "--input", "testdata/synth/sharegpt.json", "--turns", "1-2",
		"--think-time", "1s", "--conversations", "3", "--seed", "5"}},
	{"sharegpt-jsonl", []string{"--source", "sharegpt", "--input", "testdata/synth/sharegpt.jsonl", "--output-tokens", "3-",
		"--rate", "1"}},
	{"mooncake", []string{"--source", "mooncake", "--input", "testdata/synth/mooncake.jsonl", "--speed", "2",
		"--block-size", "256", "--max-input-tokens", "1000", "--model", "m1"}},
	{"mooncake-textfile", []string{"--source", "mooncake", "--input", "testdata/synth/mooncake.jsonl",
		"--text-file", "testdata/synth/text.txt", "--block-size", "16", "--duration", "3s"}},
	{"bailian", []string{"--source", "bailian", "--input", "testdata/synth/bailian.jsonl", "--start", "1s", "--limit", "3"}},
	{"azure", []string{"--source", "azure", "--input", "testdata/synth/azure.csv", "--conversations", "3"}},
	{"burstgpt", []string{"--source", "burstgpt", "--input", "testdata/synth/burstgpt.csv", "--failed", "flag",
		"--filter-model", "ChatGPT"}},
	{"agent", []string{"--agent", "--conversations", "6", "--rounds", "1-3", "--fan-out", "1-4", "--sub-agents", "0-3",
		"--tool-result-tokens", "10-40", "--tool-latency", "200ms-2s", "--input-tokens", "10-30", "--output-tokens", "5-15",
		"--system-tokens", "20", "--tools", "3", "--rate", "1", "--burstiness", "0.5", "--seed", "9"}},
	{"otel", []string{"--source", "otel", "--input", "testdata/synth/otel_spans.json", "--model", "m1"}},
}

// wroteTime is the one part of synth's stdout that changes run to run.
var wroteTime = regexp.MustCompile(`, [0-9]+\.[0-9]+s \(source`)

// The same command line gives a byte-identical trace file and report as
// the synth that wrote testdata/synth/golden.txt (with SOURCE_DATE_EPOCH
// fixing created_at; the recorded command line is the parsed flags, so it
// does not depend on os.Args).
// A change that means to alter traces regenerates the file with
// -update-synth-golden and says why in its commit.
func TestSynthGoldenByteIdentical(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1790000000")
	golden := filepath.Join("testdata", "synth", "golden.txt")
	want := map[string]string{}
	if !*updateSynthGolden {
		b, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			name, sums, _ := strings.Cut(line, " ")
			want[name] = sums
		}
	}
	// Inputs are relative paths (recorded in the metadata): the fixtures are copied into a temporary working directory.
	dir := t.TempDir()
	fixtures, err := os.ReadDir(filepath.Join("testdata", "synth"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "testdata", "synth"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range fixtures {
		b, err := os.ReadFile(filepath.Join("testdata", "synth", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "testdata", "synth", e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err = filepath.Abs(golden)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	got := map[string]string{}
	for _, c := range synthGoldenCases {
		out := c.name + ".parquet"
		stdout, stderr, code := runCLI(t, append(append([]string{"synth"}, c.args...), "-o", out)...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.name, code, stderr)
			continue
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		stdout = wroteTime.ReplaceAllString(stdout, ", T (source")
		fs, ss := sha256.Sum256(b), sha256.Sum256([]byte(stdout))
		got[c.name] = hex.EncodeToString(fs[:]) + " " + hex.EncodeToString(ss[:])
		if !*updateSynthGolden && got[c.name] != want[c.name] {
			t.Errorf("%s: file and stdout sha256 %s, golden %s; stdout:\n%s", c.name, got[c.name], want[c.name], stdout)
		}
	}
	if *updateSynthGolden {
		var lines []string
		for name, sums := range got {
			lines = append(lines, name+" "+sums)
		}
		sort.Strings(lines)
		if err := os.WriteFile(golden, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
