package tokenizer_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// shared is a file of ../shared/data (beside the repository), or "" when
// that folder is absent (a fresh clone).
func shared(tb testing.TB, rel string) string {
	tb.Helper()
	p := "../../../shared/data/" + rel
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// shareGPTAnswers is every "gpt" message of a ShareGPT JSON file (an
// array of {"conversations": [{"from", "value"}]}), or of a JSONL file of
// such records.
func shareGPTAnswers(tb testing.TB, path string) []string {
	tb.Helper()
	type rec struct {
		Conversations []struct {
			From  string `json:"from"`
			Value string `json:"value"`
		} `json:"conversations"`
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var recs []rec
	if strings.HasSuffix(path, ".jsonl") {
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var r rec
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				tb.Fatalf("%s: %v", path, err)
			}
			recs = append(recs, r)
		}
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	} else if err := json.NewDecoder(f).Decode(&recs); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, r := range recs {
		for _, m := range r.Conversations {
			if m.From == "gpt" && m.Value != "" {
				out = append(out, m.Value)
			}
		}
	}
	return out
}

// paragraphs splits a book into its paragraphs (blank-line separated).
func paragraphs(tb testing.TB, path string) []string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n")
}

// benchCorpora are the texts a benchmark counts: answers as replay counts
// them (one Count per message) and a book's paragraphs. The first 2 MB of
// each.
func benchCorpora(b *testing.B) map[string][]string {
	out := map[string][]string{}
	limit := func(texts []string) []string {
		n := 0
		for i, t := range texts {
			n += len(t)
			if n > 2<<20 {
				return texts[:i]
			}
		}
		return texts
	}
	if p := shared(b, "sharegpt/sharegpt_v3_random_sample.json"); p != "" {
		out["sharegpt-en"] = limit(shareGPTAnswers(b, p))
	}
	if p := shared(b, "sharegpt/sharegpt_zh_1K.jsonl"); p != "" {
		out["sharegpt-zh"] = limit(shareGPTAnswers(b, p))
	}
	if p := shared(b, "pg1184/pg1184.txt"); p != "" {
		out["pg1184"] = limit(paragraphs(b, p))
	}
	// The send-cpu bench stage's reference answer (bench/sendcpu.go).
	a := strings.Repeat("The next step is to measure, then to change one thing at a time. ", 23)
	out["sendcpu-answer"] = []string{"7: " + a}
	return out
}

// BenchmarkCount counts the tokens of every text of a corpus per op;
// tokens/s is the rate in wall time, tokens/cpu-s in the process's CPU
// time (steadier on a shared machine).
func BenchmarkCount(b *testing.B) {
	corpora := benchCorpora(b)
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		tok, err := tokenizer.Open(enc)
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"sendcpu-answer", "sharegpt-en", "sharegpt-zh", "pg1184"} {
			texts, ok := corpora[name]
			if !ok {
				continue
			}
			var bytes int64
			for _, t := range texts {
				bytes += int64(len(t))
			}
			b.Run(enc+"/"+name, func(b *testing.B) {
				b.SetBytes(bytes)
				tokens := 0
				c0 := processCPU()
				for b.Loop() {
					for _, t := range texts {
						tokens += tok.Count(t)
					}
				}
				cpu := processCPU() - c0
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
				if cpu > 0 {
					b.ReportMetric(float64(tokens)/cpu.Seconds(), "tokens/cpu-s")
				}
			})
		}
	}
}
