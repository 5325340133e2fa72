package synth

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// TestGenerateByteIdentical: the same seed and inputs give the same bytes;
// another seed gives other bytes.
func TestGenerateByteIdentical(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	c := defaultCorpus(t)
	dir := t.TempDir()
	write := func(name string, seed int64) []byte {
		created, err := CreatedAt()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		job := Job{
			Source:   testSynthetic(t, c, 50, seed),
			Schedule: &Schedule{Rate: 5, Burstiness: 1, TokenTime: DefaultTokenTime},
			Meta:     trace.TraceMeta{Seed: seed, CreatedAt: created, Command: "tracekit synth", Options: map[string]string{"b": "2", "a": "1"}},
			Output:   path,
		}
		res, err := Generate(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if res.Conversations != 50 || res.Bytes == 0 {
			t.Fatalf("result %+v", res)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := write("a.parquet", 9), write("b.parquet", 9)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different bytes")
	}
	if bytes.Equal(a, write("c.parquet", 10)) {
		t.Fatal("different seed, same bytes")
	}
	r, err := trace.OpenTrace(filepath.Join(dir, "a.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Meta.CreatedAt != "2023-11-14T22:13:20Z" || r.Meta.Source != "synthetic" {
		t.Fatalf("meta %+v", r.Meta)
	}
}

func TestGenerateReportsAndErrors(t *testing.T) {
	path := writeFile(t, "q.json", quirky)
	out := filepath.Join(t.TempDir(), "s.parquet")
	s := &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: defaultCorpus(t).Tokenizer()}}
	res, err := Generate(context.Background(), Job{Source: s, Schedule: &Schedule{}, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := trace.SummarizeTrace(out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Meta.Options["report.leading_assistant"] != "2" || sum.Conversations != res.Conversations || int(sum.Rows) != res.Turns {
		t.Fatalf("summary %+v, result %+v", sum, res)
	}
	if sum.WithReference != res.Turns || sum.Starts.SpanNs != 0 {
		t.Fatalf("summary %+v", sum)
	}
	s = &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: s.Opts.Tokenizer, TurnsMin: 99}}
	if _, err := Generate(context.Background(), Job{Source: s, Output: out, Replace: true}); !errors.Is(err, ErrNoConversations) {
		t.Fatalf("all filtered: %v", err)
	}
	var oe *OutputError
	_, err = Generate(context.Background(), Job{Source: &ShareGPT{Opts: ShareGPTOptions{Path: path, Tokenizer: s.Opts.Tokenizer}}, Output: filepath.Join(t.TempDir(), "no", "such", "dir.parquet")})
	if !errors.As(err, &oe) {
		t.Fatalf("unwritable output: %v", err)
	}
}

func TestSummarizeTraceStats(t *testing.T) {
	c := defaultCorpus(t)
	out := filepath.Join(t.TempDir(), "t.parquet")
	src := testSynthetic(t, c, 400, 3)
	src.Opts.Turns = Constant{V: 1}
	if _, err := Generate(context.Background(), Job{Source: src, Schedule: &Schedule{Rate: 4, Burstiness: 1}, Output: out}); err != nil {
		t.Fatal(err)
	}
	s, err := trace.SummarizeTrace(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.TurnsPerConv.Min != 1 || s.TurnsPerConv.Max != 1 || s.Conversations != 400 {
		t.Fatalf("turns %v conversations %d", s.TurnsPerConv, s.Conversations)
	}
	// 400 Poisson starts at 4/s: rate within 5 standard errors (sd of the
	// rate estimate is rate/sqrt(n)), dispersion near 1
	if d := s.Starts.PerSecond - 4; d*d > 25*16/400.0 {
		t.Fatalf("start rate %g, want 4", s.Starts.PerSecond)
	}
	if s.Starts.Dispersion < 0.5 || s.Starts.Dispersion > 1.6 {
		t.Fatalf("dispersion %g of a Poisson process", s.Starts.Dispersion)
	}
	if s.InputTokens.Min < 20 || !strings.Contains(s.InputTokens.String(), "mean") {
		t.Fatalf("input stats %v", s.InputTokens)
	}
	if time.Duration(s.SpanNs) < 60*time.Second {
		t.Fatalf("span %v for 400 starts at 4/s", time.Duration(s.SpanNs))
	}
}

// BenchmarkSynth2000x30to40 times the whole synthetic path at its target
// size (2,000 conversations of 30-40 turns, 200-400 input and 100-200
// output tokens, generated, scheduled, written) and reports trace bytes
// per turn. Goal: <= 3 s per op.
func BenchmarkSynth2000x30to40(b *testing.B) {
	c := defaultCorpus(b)
	dir := b.TempDir()
	for i := 0; b.Loop(); i++ {
		src := &Synthetic{Opts: SyntheticOptions{
			Corpus: c, Count: 2000, Seed: int64(i),
			Turns: mustDist(b, "30-40", Count), InputTokens: mustDist(b, "200-400", Count),
			OutputTokens: mustDist(b, "100-200", Count), ThinkTime: mustDist(b, "0s", Seconds),
		}}
		res, err := Generate(context.Background(), Job{Source: src, Schedule: &Schedule{Rate: 5, Burstiness: 1}, Output: filepath.Join(dir, "t.parquet"), Replace: true})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Bytes)/float64(res.Turns), "bytes/turn")
		b.ReportMetric(float64(res.Turns), "turns")
	}
}

// cancelingSource yields its conversations and then ends the run's
// context, as a SIGINT arriving while the trace is written does.
type cancelingSource struct {
	convs  []Conversation
	cancel context.CancelFunc
}

func (s cancelingSource) Name() string { return "canceling" }
func (s cancelingSource) Conversations(context.Context) ([]Conversation, error) {
	s.cancel()
	return s.convs, nil
}

// A Generate stopped while it writes leaves the existing trace byte for
// byte as it was and no temporary file; an unstopped one replaces it
// (Replace).
func TestGenerateReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "trace.parquet")
	c := defaultCorpus(t)
	if _, err := Generate(context.Background(), Job{Source: testSynthetic(t, c, 5, 1), Schedule: &Schedule{}, Output: out}); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	convs, err := testSynthetic(t, c, 50, 2).Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = Generate(ctx, Job{Source: cancelingSource{convs, cancel}, Schedule: &Schedule{}, Output: out, Replace: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted write: %v", err)
	}
	if now, _ := os.ReadFile(out); !bytes.Equal(now, old) {
		t.Fatal("an interrupted write changed the existing trace")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	// Uninterrupted, the same conversations replace it.
	if _, err := Generate(context.Background(), Job{Source: cancelingSource{convs, func() {}}, Schedule: &Schedule{}, Output: out, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if sum, err := trace.SummarizeTrace(out); err != nil || sum.Conversations != 50 {
		t.Fatalf("replaced trace: %d conversations, %v", sum.Conversations, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}

// Without Replace an existing output is never replaced: one there before
// is refused before the source runs, one that appears while the trace is
// written is kept (the rename refuses); both errors are OutputErrors
// wrapping fs.ErrExist, and no temporary file is left.
func TestGenerateNeverReplacesWithoutReplace(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "trace.parquet")
	old := []byte("an earlier result")
	if err := os.WriteFile(out, old, 0o644); err != nil {
		t.Fatal(err)
	}
	ran := false
	src := appearingSource{run: func() { ran = true }}
	_, err := Generate(context.Background(), Job{Source: src, Schedule: &Schedule{}, Output: out})
	var outErr *OutputError
	if !errors.As(err, &outErr) || !errors.Is(err, fs.ErrExist) || ran {
		t.Fatalf("existing output: %v (source ran: %v); want an OutputError wrapping fs.ErrExist before the source runs", err, ran)
	}
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	c := defaultCorpus(t)
	convs, err := testSynthetic(t, c, 3, 1).Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The output appears after the check, while the source runs.
	src = appearingSource{convs: convs, run: func() {
		if err := os.WriteFile(out, old, 0o644); err != nil {
			t.Error(err)
		}
	}}
	_, err = Generate(context.Background(), Job{Source: src, Schedule: &Schedule{}, Output: out})
	if !errors.As(err, &outErr) || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("output appearing while written: %v; want an OutputError wrapping fs.ErrExist", err)
	}
	if now, _ := os.ReadFile(out); !bytes.Equal(now, old) {
		t.Fatalf("the output that appeared was replaced: %q", now)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}

// appearingSource calls run when asked for its conversations.
type appearingSource struct {
	convs []Conversation
	run   func()
}

func (s appearingSource) Name() string { return "appearing" }
func (s appearingSource) Conversations(context.Context) ([]Conversation, error) {
	s.run()
	return s.convs, nil
}

// BenchmarkSynthPG1184 is BenchmarkSynth2000x30to40 on vLLM's multi-turn
// text (pg1184.txt, from ../shared) under o200k_base, corpus encoding
// included: what vLLM's generator is compared with.
func BenchmarkSynthPG1184(b *testing.B) {
	text, err := os.ReadFile("../../../shared/data/pg1184/pg1184.txt")
	if err != nil {
		b.Skip("../shared/data/pg1184 not present")
	}
	dir := b.TempDir()
	for i := 0; b.Loop(); i++ {
		c, err := NewCorpus(string(text), tokenizer.Default())
		if err != nil {
			b.Fatal(err)
		}
		src := &Synthetic{Opts: SyntheticOptions{
			Corpus: c, Count: 2000, Seed: int64(i),
			Turns: mustDist(b, "30-40", Count), InputTokens: mustDist(b, "200-400", Count),
			OutputTokens: mustDist(b, "100-200", Count), ThinkTime: mustDist(b, "0s", Seconds),
		}}
		res, err := Generate(context.Background(), Job{Source: src, Schedule: &Schedule{Rate: 5, Burstiness: 1}, Output: filepath.Join(dir, "t.parquet"), Replace: true})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Turns), "turns")
	}
}
