package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/golden"
	"github.com/tracekit/tracekit/trace"
)

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
	{"aiperf-dag", []string{"--source", "aiperf-dag", "--input", "testdata/synth/aiperf_dag.jsonl", "--rate", "1", "--seed", "3"}},
	{"weka", []string{"--source", "weka", "--input", "testdata/synth/weka.jsonl"}},
	{"swe-agent", []string{"--source", "swe-agent", "--input", "testdata/synth/swe_agent.traj", "--rate", "1", "--seed", "4"}},
	{"dynamo", []string{"--source", "dynamo", "--input", "testdata/synth/dynamo.jsonl"}},
	{"otel", []string{"--source", "otel", "--input", "testdata/synth/otel_spans.json", "--model", "m1"}},
	{"responses", []string{"--endpoint", "responses", "--conversations", "2", "--turns", "2", "--input-tokens", "10-20",
		"--output-tokens", "5", "--rate", "1", "--seed", "12"}},
	{"messages-agent", []string{"--endpoint", "messages", "--agent", "--conversations", "2", "--rounds", "1-2", "--fan-out", "2",
		"--tool-result-tokens", "10", "--input-tokens", "10", "--output-tokens", "5", "--system-tokens", "10", "--tools", "2", "--seed", "13"}},
	{"embeddings", []string{"--endpoint", "embeddings", "--conversations", "3", "--batch-size", "1-3", "--input-tokens", "5-15",
		"--rate", "2", "--seed", "14"}},
	{"rerank", []string{"--endpoint", "rerank", "--conversations", "2", "--documents", "2-3", "--query-tokens", "6",
		"--document-tokens", "8-12", "--text-file", "testdata/synth/text.txt", "--seed", "15"}},
	{"score", []string{"--endpoint", "score", "--conversations", "2", "--documents", "2", "--query-tokens", "5",
		"--document-tokens", "7", "--rate", "0", "--seed", "16"}},
}

// wroteLine is the part of synth's stdout that depends on the file's
// bytes and the run, not on its rows: the size and the time.
var wroteLine = regexp.MustCompile(`(?m)^(wrote \S+: \d+ conversations, \d+ turns), [^,]+, [0-9]+\.[0-9]+s \(source`)

// synthOutput is what one golden case made: the trace decoded and what
// synth printed.
type synthOutput struct {
	rows   []trace.Turn
	meta   trace.TraceMeta
	stdout string
}

// goldenMeta is a trace's metadata as the goldens hold it: without
// tracekit_version, which changes with the release, not with the trace
// (the field below hides the embedded one: encoding/json takes the
// shallower field, and omits it when nil).
type goldenMeta struct {
	trace.TraceMeta
	TracekitVersion *struct{} `json:"tracekit_version,omitempty"`
}

// The same command lines give the same trace as the synth that wrote the
// goldens: every decoded row, field by field, and the metadata
// (testdata/synth/golden/CASE.jsonl: the metadata on line 1, then one row
// per line, in file order), and the same report on stdout
// (testdata/synth/golden/stdout.txt). SOURCE_DATE_EPOCH fixes created_at;
// the recorded command line is the parsed flags, so it does not depend on
// os.Args. A change that means to alter traces regenerates the goldens
// with -update and says why in its commit; a failure names the case, the
// row and the field that differ.
func TestSynthGolden(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1790000000")
	outputs := map[string]synthOutput{}
	t.Run("generate", func(t *testing.T) {
		// Inputs are relative paths (recorded in the metadata): the
		// fixtures are copied into a temporary working directory.
		dir := t.TempDir()
		fixtures, err := os.ReadDir(filepath.Join("testdata", "synth"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "testdata", "synth"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range fixtures {
			if e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join("testdata", "synth", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "testdata", "synth", e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Chdir(dir)
		for _, c := range synthGoldenCases {
			out := c.name + ".parquet"
			stdout, stderr, code := runCLI(t, append(append([]string{"synth"}, c.args...), "-o", out)...)
			if code != 0 {
				t.Errorf("%s: exit %d: %s", c.name, code, stderr)
				continue
			}
			rows, meta, err := trace.ReadTurns(out)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			outputs[c.name] = synthOutput{rows, meta, wroteLine.ReplaceAllString(stdout, "$1, SIZE, TIME (source")}
		}
	})
	var stdouts strings.Builder
	for _, c := range synthGoldenCases {
		o, ok := outputs[c.name]
		if !ok {
			continue // reported above
		}
		if o.meta.TracekitVersion != trace.Version {
			t.Errorf("%s: tracekit_version %q, want %q", c.name, o.meta.TracekitVersion, trace.Version)
		}
		lines := []golden.Line{{Name: "metadata", Value: goldenMeta{TraceMeta: o.meta}}}
		for i, r := range o.rows {
			lines = append(lines, golden.Line{Name: fmt.Sprintf("row %d: conversation %s turn %d", i, r.ConversationID, r.Turn), Value: r})
		}
		golden.CheckJSONL(t, filepath.Join("synth", "golden", c.name+".jsonl"), lines)
		fmt.Fprintf(&stdouts, "== %s\n%s", c.name, o.stdout)
	}
	if len(outputs) == len(synthGoldenCases) {
		golden.Check(t, filepath.Join("synth", "golden", "stdout.txt"), []byte(stdouts.String()))
	}
}
