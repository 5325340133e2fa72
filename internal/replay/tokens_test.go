package replay

import (
	"fmt"
	"testing"
	"time"

	tk "github.com/tiktoken-go/tokenizer"

	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/trace"
)

// TestHistoryTokensAsTheLibrary: the input tokens recorded for turns whose
// history holds reference answers (closed loop) or reference and filler
// answers (open loop) are the messages' stored counts plus each answer
// counted by tiktoken-go's own codec, for answers mixing ASCII with other
// scripts, contractions, DEL and runs of whitespace and newlines.
func TestHistoryTokensAsTheLibrary(t *testing.T) {
	lib, err := tk.Get(tk.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int32 {
		n, err := lib.Count(s)
		if err != nil {
			t.Fatal(err)
		}
		return int32(n)
	}
	answers := []string{
		"Here’s the plan:\n\n  1. Don't stop\x7f — naïve ünïcode 中文 it'll   work\r\n\tOK",
		"func main() {\n\tfmt.Println(\"hello, world\") // THEY'RE 12345678\n}\n\n\n    ",
		"", // open loop: a filler answer of OutputTokens tokens
		"The next step is to measure, then to change one thing at a time. 😀 done",
	}
	var turns []trace.Turn
	for k, a := range answers {
		turns = append(turns, trace.Turn{ConversationID: "tok", Turn: int32(k),
			ArrivalOffsetNs: int64(k) * int64(5*time.Millisecond), ThinkTimeNs: int64(time.Millisecond),
			Messages:        []trace.Message{{Role: "user", Content: fmt.Sprintf("question %d", k), Tokens: 3}},
			ReferenceAnswer: a, OutputTokens: 5})
	}
	srv := mocktest.Start(t, nil)
	for _, timing := range []Timing{TimingClosed, TimingTrace} {
		t.Run(string(timing), func(t *testing.T) {
			cfg := Config{Trace: writeTrace(t, turns), Targets: []string{srv.URL()}, Timing: timing, History: HistoryReference, Seed: 3}
			sink, res := run(t, cfg)
			if res.Errors != 0 {
				t.Fatalf("result %+v", res)
			}
			recs := sink.byID()
			want := int32(0)
			for k, turn := range turns {
				want += turn.Messages[0].Tokens
				r, ok := recs[fmt.Sprintf("tok-%d-0", k)]
				if !ok {
					t.Fatalf("turn %d not recorded", k)
				}
				if r.InputTokens != want {
					t.Errorf("turn %d: input tokens %d, want %d", k, r.InputTokens, want)
				}
				a := turn.ReferenceAnswer
				if a == "" {
					if timing == TimingClosed {
						want += r.CompletionTokens // no reference answer: the closed loop carries the server's, as it counted it
						continue
					}
					a = fillerText(turn.OutputTokens, cfg.Seed, fmt.Sprintf("%s/%d/answer", turn.ConversationID, turn.Turn))
				}
				want += count(a)
			}
		})
	}
}
