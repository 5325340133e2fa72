package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
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
	t.Parallel() // an end-to-end run of its own: files, mock and ports of its own
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

// printedLine is the line of stdout that starts with prefix (after its
// indentation), or "".
func printedLine(stdout, prefix string) string {
	for _, l := range strings.Split(stdout, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// A vllm bench serve command line with vLLM's own readiness wait and
// percentile choices: the trace is vLLM's random dataset, arrivals are
// spread as vLLM spreads them (the last on N/rate), and the printed
// commands carry what vLLM would do (--ignore-eos for random, the ready
// wait, the percentiles and metrics analyze knows).
func TestSynthFromVLLMSeedLine(t *testing.T) {
	dir := t.TempDir()
	line := "vllm bench serve --backend vllm --model m --dataset-name random --random-input-len 100 --random-output-len 100 " +
		"--num-prompts 50 --request-rate 5 --ready-check-timeout-sec 0 --percentile-metrics itl,tps,ttft,e2el --metric-percentiles 90 --seed 1"
	out := filepath.Join(dir, "seed.parquet")
	stdout, stderr, code := runCLI(t, "synth", "--from-vllm", line, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, meta, err := trace.ReadTurns(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 50 || meta.Source != "vllm-random" || meta.Seed != 1 {
		t.Fatalf("%d rows from %s seed %d, want 50 from vllm-random seed 1", len(rows), meta.Source, meta.Seed)
	}
	var first, last int64 = math.MaxInt64, 0
	for _, r := range rows {
		if r.InputTokens != 100 || r.OutputTokens != 100 || r.Endpoint != "" {
			t.Fatalf("%s: %d in, %d out, endpoint %q; want 100, 100 and replay's", r.ConversationID, r.InputTokens, r.OutputTokens, r.Endpoint)
		}
		first, last = min(first, r.StartOffsetNs), max(last, r.StartOffsetNs)
	}
	// vLLM: N gamma gaps, the first before request 0, rescaled so the
	// last arrival is at N/rate = 10 s
	if last != 10e9 || first <= 0 {
		t.Errorf("arrivals %d..%d ns, want the first after 0 and the last at 10 s", first, last)
	}
	replay := printedLine(stdout, "tracekit replay")
	want := "tracekit replay " + out + " --target http://127.0.0.1:8000 --endpoint completions --ready-timeout 0s --model m --ignore-eos -o recording.parquet"
	if replay != want {
		t.Errorf("replay line\n %q\nwant\n %q", replay, want)
	}
	if a := printedLine(stdout, "tracekit analyze"); a != "tracekit analyze recording.parquet --percentiles 90 --metrics itl,ttft,e2el" {
		t.Errorf("analyze line %q", a)
	}
	if !strings.Contains(stdout, "--percentile-metrics tps") {
		t.Errorf("stdout does not say tps was left out:\n%s", stdout)
	}
	// the printed commands parse
	for _, l := range []string{replay, printedLine(stdout, "tracekit analyze")} {
		args := strings.Fields(l)[1:]
		cmd := newRoot()
		sub, rest, err := cmd.Find(args)
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.ParseFlags(rest); err != nil {
			t.Errorf("%q: %v", l, err)
		}
	}
	// the same line gives the same trace
	out2 := filepath.Join(dir, "seed2.parquet")
	if _, stderr, code := runCLI(t, "synth", "--from-vllm", line, "-o", out2); code != 0 {
		t.Fatal(stderr)
	}
	rows2, _, err := trace.ReadTurns(out2)
	if err != nil || !reflect.DeepEqual(rows, rows2) {
		t.Errorf("the same command line gave another trace (%v)", err)
	}
}

// vLLM's backends map to APIs: the printed replay command's --endpoint
// and, for the pooling APIs, the trace's requests.
func TestSynthFromVLLMBackends(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct {
		line, endpoint string
		check          func(t *testing.T, rows []trace.Turn)
	}{
		{"--backend openai --num-prompts 3", "completions", nil},
		{"--backend vllm --num-prompts 3", "completions", nil},
		{"--num-prompts 3", "completions", nil},
		{"--backend openai-chat --endpoint /v1/chat/completions --num-prompts 3", "chat", nil},
		{"--backend openai-embeddings --endpoint /v1/embeddings --random-input-len 40 --random-batch-size 4 --num-prompts 10 --request-rate 2",
			"embeddings", func(t *testing.T, rows []trace.Turn) {
				if len(rows) != 3 { // ceil(10/4) requests
					t.Fatalf("%d requests, want 3", len(rows))
				}
				for _, r := range rows {
					if r.Endpoint != "embeddings" || len(r.Messages) != 4 || r.InputTokens != 160 {
						t.Fatalf("%s: %s, %d inputs, %d tokens; want embeddings of 4 x 40", r.ConversationID, r.Endpoint, len(r.Messages), r.InputTokens)
					}
				}
			}},
		{"--backend vllm-rerank --endpoint /v1/rerank --dataset-name random-rerank --random-input-len 100 --random-batch-size 5 --num-prompts 10",
			"rerank", func(t *testing.T, rows []trace.Turn) {
				if len(rows) != 2 {
					t.Fatalf("%d requests, want 2", len(rows))
				}
				for _, r := range rows {
					// a query of 100/2 - 1 tokens, documents of 100 - 49 - 1
					if r.Endpoint != "rerank" || len(r.Messages) != 6 || r.Messages[0].Tokens != 49 || r.Messages[1].Tokens != 50 {
						t.Fatalf("%s: %s, %d messages, query %d tokens", r.ConversationID, r.Endpoint, len(r.Messages), r.Messages[0].Tokens)
					}
				}
			}},
	} {
		out := filepath.Join(dir, fmt.Sprintf("b%d.parquet", i))
		stdout, stderr, code := runCLI(t, "synth", "-o", out, "--from-vllm", "vllm bench serve --model m "+c.line)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.line, code, stderr)
			continue
		}
		if r := printedLine(stdout, "tracekit replay"); !strings.Contains(r, " --endpoint "+c.endpoint+" ") {
			t.Errorf("%s: replay line %q, want --endpoint %s", c.line, r, c.endpoint)
		}
		if !trace.Generates(c.endpoint) && !strings.Contains(printedLine(stdout, "tracekit analyze"), "--metrics e2el") {
			t.Errorf("%s: analyze line %q, want vLLM's pooling metric e2el", c.line, printedLine(stdout, "tracekit analyze"))
		}
		if c.check != nil {
			rows, _, err := trace.ReadTurns(out)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, rows)
		}
	}
}

// Every flag tracekit cannot honour is named in one refusal; fork flags
// say what to use instead.
func TestSynthFromVLLMRefusesAll(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		line string
		want []string
	}{
		{"vllm bench serve --backend openai-audio --sharegpt-input-len 5 --max-connections-per-worker 3 --num-warmups 3 --dataset-name sonnet",
			[]string{"5 flag(s)", "--backend openai-audio", "--sharegpt-input-len: not a vllm bench serve flag", "--random-input-len",
				"--max-connections-per-worker: not a vllm bench serve flag", "--max-concurrency", "--num-warmups", "--dataset-name sonnet"}},
		{"vllm bench serve --profile --num-prompts 5 --ramp-up-strategy linear --use-beam-search",
			[]string{"3 flag(s)", "--profile", "--ramp-up-strategy", "--use-beam-search"}},
		{"vllm bench serve --backend vllm-pooling", []string{"--backend vllm-pooling"}},
		{"vllm bench serve --backend openai-embeddings-chat", []string{"--backend openai-embeddings-chat"}},
		{"vllm bench serve --backend openai-embeddings --dataset-name sharegpt --dataset-path x.json", []string{"--dataset-name sharegpt with --backend openai-embeddings"}},
		{"vllm bench serve --backend vllm-rerank --dataset-name random-rerank --no-reranker", []string{"--no-reranker"}},
		{"vllm bench serve --backend openai-chat --endpoint /v1/embeddings", []string{"--endpoint /v1/embeddings with --backend openai-chat"}},
		{"vllm bench serve --endpoint /v1/score", []string{"--endpoint /v1/score", "no score backend"}},
	} {
		out := filepath.Join(dir, "x.parquet")
		_, stderr, code := runCLI(t, "synth", "--from-vllm", c.line, "-o", out)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2: %s", c.line, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q lacks %q", c.line, stderr, w)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%q: wrote a trace", c.line)
		}
	}
}
