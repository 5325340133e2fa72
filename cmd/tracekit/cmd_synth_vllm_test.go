package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// sharedData is ../shared/data/<rel> beside the repository, or the test
// is skipped.
func sharedData(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "data", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s absent: %v", p, err)
	}
	return p
}

// gapStats are the mean and coefficient of variation of the gaps between
// sorted start offsets, in seconds.
func gapStats(rows []trace.Turn) (mean, cv float64) {
	var at []int64
	for _, r := range rows {
		at = append(at, r.StartOffsetNs)
	}
	slices.Sort(at)
	var sum, sq float64
	n := float64(len(at) - 1)
	for i := 1; i < len(at); i++ {
		g := float64(at[i]-at[i-1]) / 1e9
		sum += g
		sq += g * g
	}
	mean = sum / n
	return mean, math.Sqrt(sq/n-mean*mean) / mean
}

func TestSynthFromVLLMShareGPT(t *testing.T) {
	in := sharedData(t, filepath.Join("sharegpt", "sharegpt_v3_random_sample.json"))
	out := filepath.Join(t.TempDir(), "v.parquet")
	line := "vllm bench serve --dataset-name sharegpt --dataset-path " + in +
		" --sharegpt-output-len 1000 --num-prompts 32400 --request-rate 78 --max-concurrency 10800 --ignore-eos"
	stdout, stderr, code := runCLI(t, "synth", "--from-vllm", line, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, meta, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 32400 || meta.Source != "vllm-sharegpt" {
		t.Fatalf("%d rows from %s, want 32400 from vllm-sharegpt", len(rows), meta.Source)
	}
	for _, r := range rows {
		if r.OutputTokens != 1000 || r.Turn != 0 || r.InputTokens < 4 || r.InputTokens > 1024 {
			t.Fatalf("%s: turn %d, %d in, %d out; want single requests of 4..1024 in, 1000 out", r.ConversationID, r.Turn, r.InputTokens, r.OutputTokens)
		}
	}
	// Poisson at 78/s: 32,399 exponential gaps have a mean within 3% of
	// 1/78 s (its standard error is 1/sqrt(32399) = 0.56%) and a
	// coefficient of variation within 5% of 1 (its standard error is
	// about 0.6% too): the whole command line, 32,400 prompts.
	mean, cv := gapStats(rows)
	t.Logf("gaps: mean %.5fs (%+.2f%% of 1/78 s), cv %.3f", mean, 100*(mean*78-1), cv)
	if math.Abs(mean*78-1) > 0.03 || math.Abs(cv-1) > 0.05 {
		t.Errorf("gaps: mean %.5fs (want %.5fs +-3%%), cv %.3f (want 1 +-0.05)", mean, 1.0/78, cv)
	}
	var replay string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, "tracekit replay") {
			replay = l
		}
	}
	if !strings.Contains(replay, " --max-concurrency 10800") || !strings.Contains(replay, " --ignore-eos") || !strings.Contains(replay, out) {
		t.Errorf("replay line %q; stdout:\n%s", replay, stdout)
	}
	if meta.Options["report.oversampled"] == "" || meta.Options["sharegpt-output-len"] != "1000" {
		t.Errorf("options %v", meta.Options)
	}
}

// vLLM's random dataset: lengths integer-uniform around the means, a
// shared prefix on top, gamma arrivals with the burstiness.
func TestSynthFromVLLMRandom(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.parquet")
	stdout, stderr, code := runCLI(t, "synth", "-o", out, "--from-vllm", `vllm bench serve --model m1 --dataset-name random \
  --random-input-len 200 --random-output-len 50 --random-range-ratio 0.25 --random-prefix-len 30 \
  --num-prompts 3000 --request-rate 20 --burstiness 4 --goodput ttft:500 tpot:50 --metric-percentiles 50,99 --seed 3`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, _, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3000 {
		t.Fatalf("%d rows", len(rows))
	}
	seenIn, seenOut := map[int32]bool{}, map[int32]bool{}
	prefix := ""
	for i, r := range rows {
		in, o := r.InputTokens, r.OutputTokens
		if in < 30+150 || in > 30+250 || o < 37 || o > 63 || r.Messages[0].Tokens != in {
			t.Fatalf("%s: %d in, %d out; want 180..280 and 37..63", r.ConversationID, in, o)
		}
		seenIn[in], seenOut[o] = true, true
		if i == 0 {
			prefix = r.Messages[0].Content[:40]
		} else if !strings.HasPrefix(r.Messages[0].Content, prefix) {
			t.Fatalf("%s does not open with the shared prefix", r.ConversationID)
		}
	}
	if !seenIn[180] || !seenIn[280] || !seenOut[37] || !seenOut[63] || len(seenIn) != 101 {
		t.Errorf("input lengths %d distinct (ends %v %v), output ends %v %v", len(seenIn), seenIn[180], seenIn[280], seenOut[37], seenOut[63])
	}
	// gamma shape 4: mean gap 1/20 s, coefficient of variation 1/sqrt(4)
	mean, cv := gapStats(rows)
	if math.Abs(mean*20-1) > 0.06 || math.Abs(cv-0.5) > 0.05 {
		t.Errorf("gaps: mean %.4fs (want 0.05 +-6%%), cv %.3f (want 0.5 +-0.05)", mean, cv)
	}
	for _, want := range []string{"--model m1", "--endpoint completions", "--goodput ttft:500,tpot:50", "--percentiles 50,99"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// Flags tracekit cannot honour are refused, exit 2, naming them.
func TestSynthFromVLLMRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ line, want string }{
		{"vllm bench serve --dataset-name sonnet --dataset-path x", "--dataset-name sonnet"},
		{"vllm bench serve --dataset-name random --num-warmups 5", "--num-warmups"},
		{"vllm bench serve --backend tgi", "--backend tgi"},
		{"vllm bench serve --request-rate", "--request-rate: missing its value"},
		{"vllm bench serve --dataset-name 'random", "unterminated"},
	} {
		out := filepath.Join(dir, "x.parquet")
		_, stderr, code := runCLI(t, "synth", "--from-vllm", c.line, "-o", out)
		if code != 2 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "--from-vllm") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %q", c.line, code, stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q: wrote a trace", c.line)
		}
	}
	_, stderr, code := runCLI(t, "synth", "--source", "synthetic", "--from-vllm", "vllm bench serve", "-o", filepath.Join(dir, "y.parquet"))
	if code != 2 || !strings.Contains(stderr, "--source") {
		t.Errorf("--source with --from-vllm: exit %d %s", code, stderr)
	}
}
