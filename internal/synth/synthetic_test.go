package synth

import (
	"context"
	"errors"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/trace"
)

// defaultCorpus is the default corpus under o200k_base, built once for
// the package's tests (a Corpus is immutable but for its cache of cut
// points, which never changes what Text returns).
func defaultCorpus(t testing.TB) *Corpus { return importCorpus(t) }

func mustDist(t testing.TB, spec string, unit Unit) Dist {
	t.Helper()
	d, err := ParseDist(spec, unit)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testSynthetic(t testing.TB, c *Corpus, n int, seed int64) *Synthetic {
	return &Synthetic{Opts: SyntheticOptions{
		Corpus: c, Count: n, Seed: seed,
		Turns:              mustDist(t, "3-6", Count),
		InputTokens:        mustDist(t, "20-60", Count),
		OutputTokens:       mustDist(t, "10-30", Count),
		PrefixTokens:       mustDist(t, "lognormal:average=80,max=200", Count),
		CommonPrefixTokens: mustDist(t, "50", Count),
		ThinkTime:          mustDist(t, "1s-3s", Seconds),
	}}
}

// TestSyntheticTokenExact re-encodes every message and reference answer
// and checks the counts the trace claims, the ranges, and the prefix
// structure.
func TestSyntheticTokenExact(t *testing.T) {
	c := defaultCorpus(t)
	tok := c.Tokenizer()
	convs, err := testSynthetic(t, c, 40, 7).Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 40 {
		t.Fatalf("%d conversations", len(convs))
	}
	var common string
	firstUser := map[string]string{}
	for _, conv := range convs {
		if len(conv) < 3 || len(conv) > 6 {
			t.Fatalf("%s has %d turns, want 3..6", conv[0].ConversationID, len(conv))
		}
		for k, turn := range conv {
			if int(turn.Turn) != k || turn.ConversationID != conv[0].ConversationID {
				t.Fatalf("turn %d labelled %s/%d", k, turn.ConversationID, turn.Turn)
			}
			sum := 0
			for _, m := range turn.Messages {
				if got := tok.Count(m.Content); got != int(m.Tokens) {
					t.Fatalf("%s turn %d %s message claims %d tokens, has %d", turn.ConversationID, k, m.Role, m.Tokens, got)
				}
				sum += int(m.Tokens)
			}
			if sum != int(turn.InputTokens) {
				t.Fatalf("input tokens %d, messages sum to %d", turn.InputTokens, sum)
			}
			if got := tok.Count(turn.ReferenceAnswer); got != int(turn.OutputTokens) || got < 10 || got > 30 {
				t.Fatalf("reference answer has %d tokens, output tokens %d (want 10..30)", got, turn.OutputTokens)
			}
			user := turn.Messages[len(turn.Messages)-1]
			if user.Role != "user" || user.Tokens < 20 || user.Tokens > 60 {
				t.Fatalf("last message %s with %d tokens, want a user message of 20..60", user.Role, user.Tokens)
			}
			if k == 0 {
				if turn.ThinkTimeNs != 0 {
					t.Fatalf("turn 0 think time %d", turn.ThinkTimeNs)
				}
				sys := turn.Messages[0]
				if sys.Role != "system" || len(turn.Messages) != 2 {
					t.Fatalf("turn 0 has no system message: %+v", turn.Messages)
				}
				// the common prefix is the first 50 tokens of every system prompt
				ids := tok.Encode(sys.Content)
				head := tok.Decode(ids[:50])
				if common == "" {
					common = head
				} else if head != common {
					t.Fatalf("common prefix differs: %q vs %q", head, common)
				}
				firstUser[conv[0].ConversationID] = sys.Content[len(common):]
			} else {
				if len(turn.Messages) != 1 {
					t.Fatalf("turn %d has %d messages", k, len(turn.Messages))
				}
				if turn.ThinkTimeNs < int64(time.Second) || turn.ThinkTimeNs > int64(3*time.Second) {
					t.Fatalf("think time %v outside 1s..3s", time.Duration(turn.ThinkTimeNs))
				}
			}
		}
	}
	// Conversations share nothing past the common prefix: their own parts
	// start with distinct markers.
	seen := map[string]bool{}
	for id, rest := range firstUser {
		key := rest[:min(len(rest), 20)]
		if seen[key] {
			t.Fatalf("%s shares its first words after the common prefix with another conversation: %q", id, key)
		}
		seen[key] = true
	}
}

func TestSyntheticDeterministicAndStable(t *testing.T) {
	c := defaultCorpus(t)
	a, err := testSynthetic(t, c, 30, 11).Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := testSynthetic(t, c, 30, 11).Conversations(context.Background())
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different conversations")
	}
	more, _ := testSynthetic(t, c, 60, 11).Conversations(context.Background())
	if !reflect.DeepEqual(a[:30], more[:30]) {
		t.Fatal("conversation i changed when the count grew")
	}
	other, _ := testSynthetic(t, c, 30, 12).Conversations(context.Background())
	if reflect.DeepEqual(a, other) {
		t.Fatal("different seeds, same conversations")
	}
}

func TestSyntheticRejectsBadConfig(t *testing.T) {
	c := defaultCorpus(t)
	s := testSynthetic(t, c, 0, 1)
	if _, err := s.Conversations(context.Background()); err == nil {
		t.Fatal("0 conversations accepted")
	}
	s = testSynthetic(t, c, 3, 1)
	s.Opts.Turns = nil
	if _, err := s.Conversations(context.Background()); err == nil || !strings.Contains(err.Error(), "Turns") {
		t.Fatalf("missing turns: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := testSynthetic(t, c, 3, 1).Conversations(ctx); err == nil {
		t.Fatal("canceled context ignored")
	}
}

// TestScheduleGaps checks the gamma arrival process: mean gap 1/rate and
// the gap variance 1/(rate^2 * burstiness) of a gamma with shape B and
// scale 1/(rate*B).
func TestScheduleGaps(t *testing.T) {
	const n = 20000
	for _, b := range []float64{0.5, 1, 4} {
		convs := make([]Conversation, n)
		for i := range convs {
			convs[i] = Conversation{{OutputTokens: 10}, {OutputTokens: 10, ThinkTimeNs: 1e9}}
		}
		Schedule{Rate: 5, Burstiness: b, TokenTime: 20 * time.Millisecond}.Apply(convs, 3)
		var sum, sum2 float64
		for i := 1; i < n; i++ {
			g := float64(convs[i][0].StartOffsetNs-convs[i-1][0].StartOffsetNs) / 1e9
			if g < 0 {
				t.Fatalf("negative gap %g", g)
			}
			sum += g
			sum2 += g * g
		}
		m := sum / (n - 1)
		v := sum2/(n-1) - m*m
		wantVar := 1 / (25 * b)
		if tol := 5 * math.Sqrt(wantVar/(n-1)); math.Abs(m-0.2) > tol {
			t.Errorf("burstiness %g: mean gap %g, want 0.2 ± %g", b, m, tol)
		}
		if math.Abs(v-wantVar) > 0.1*wantVar {
			t.Errorf("burstiness %g: gap variance %g, want %g", b, v, wantVar)
		}
		c := convs[7]
		if c[0].StartOffsetNs != c[1].StartOffsetNs || c[0].ArrivalOffsetNs != c[0].StartOffsetNs {
			t.Fatalf("start offsets differ within a conversation: %+v", c)
		}
		if got, want := c[1].ArrivalOffsetNs-c[0].ArrivalOffsetNs, int64(10*20*time.Millisecond+time.Second); got != want {
			t.Fatalf("turn 1 arrives %v after turn 0, want %v", time.Duration(got), time.Duration(want))
		}
	}
	convs := []Conversation{{{}}, {{}}, {{}}}
	Schedule{Rate: math.Inf(1)}.Apply(convs, 1)
	for _, c := range convs {
		if c[0].StartOffsetNs != 0 {
			t.Fatal("rate inf did not start everything at 0")
		}
	}
	if (Schedule{Rate: -1}).Validate() == nil || (Schedule{Rate: 1, Burstiness: -2}).Validate() == nil {
		t.Fatal("bad schedule validated")
	}
}

// TestSyntheticWriteReadBack writes a trace through Write and reads it
// back with trace's reader.
func TestSyntheticWriteReadBack(t *testing.T) {
	c := defaultCorpus(t)
	convs, err := testSynthetic(t, c, 25, 5).Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	Schedule{Rate: 10, Burstiness: 1, TokenTime: DefaultTokenTime}.Apply(convs, 5)
	want := 0
	for _, conv := range convs {
		want += len(conv)
	}
	path := filepath.Join(t.TempDir(), "t.parquet")
	if err := Write(context.Background(), path, false, trace.TraceMeta{Seed: 5, Source: "synthetic"}, convs); err != nil {
		t.Fatal(err)
	}
	r, err := trace.OpenTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rows := make([]trace.Turn, 64)
	var got []trace.Turn
	for {
		n, err := r.Read(rows)
		got = append(got, rows[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != want {
		t.Fatalf("read %d rows, wrote %d", len(got), want)
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if a.StartOffsetNs > b.StartOffsetNs || (a.ConversationID == b.ConversationID && a.Turn+1 != b.Turn) {
			t.Fatalf("rows %d,%d out of order: %s/%d@%d then %s/%d@%d", i-1, i, a.ConversationID, a.Turn, a.StartOffsetNs, b.ConversationID, b.Turn, b.StartOffsetNs)
		}
	}
	if got[0].Messages[0].Role != "system" || got[0].ReferenceAnswer == "" {
		t.Fatalf("first row lost its content: %+v", got[0])
	}
}

// EstimatedBytes, which MaxBytes is held to, is close to the text the
// trace really holds; a limit below it refuses the source before any text
// is made, naming MaxBytes.
func TestSyntheticEstimatedBytes(t *testing.T) {
	c := defaultCorpus(t)
	s := testSynthetic(t, c, 300, 5)
	convs, err := s.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var text int
	for _, conv := range convs {
		for _, turn := range conv {
			for _, m := range turn.Messages {
				text += len(m.Content)
			}
			text += len(turn.ReferenceAnswer)
		}
	}
	est := s.EstimatedBytes()
	if r := est / float64(text); r < 0.85 || r > 1.15 {
		t.Fatalf("estimate %.0f bytes, the trace holds %d (ratio %.2f)", est, text, r)
	}
	s.Opts.MaxBytes = int64(est) - 1
	_, err = NewSynthetic(s.Opts)
	var fe *fielderr.Error
	if !errors.As(err, &fe) || fe.Field != "MaxBytes" || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("limit below the estimate: %v", err)
	}
	s.Opts.MaxBytes = int64(est) + 1
	if _, err := NewSynthetic(s.Opts); err != nil {
		t.Fatal(err)
	}
}
