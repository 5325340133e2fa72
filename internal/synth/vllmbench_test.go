package synth

import (
	"context"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// vLLM's ShareGPT rules: the first two messages whatever their roles,
// records with fewer than 2 (or only "messages") skipped, the validity
// filter, oversampling to Count unless NoOversample.
func TestVLLMShareGPTSampling(t *testing.T) {
	long := strings.Repeat("word ", 1100)
	body := `[
 {"id": "a", "conversations": [{"from": "gpt", "value": "An answer that opens the record here"}, {"from": "human", "value": "and a question that follows it now"}]},
 {"id": "short", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello there, how can I help you today?"}]},
 {"id": "long", "conversations": [{"from": "human", "value": "` + long + `"}, {"from": "gpt", "value": "That is a long text indeed, friend."}]},
 {"id": "one", "conversations": [{"from": "human", "value": "Only one message in this record"}]},
 {"id": "msgs", "messages": [{"role": "user", "content": "OpenAI style is not read by vLLM"}, {"role": "assistant", "content": "so it is skipped here"}]},
 {"id": "tiny-answer", "conversations": [{"from": "human", "value": "Say yes to me please, will you?"}, {"from": "gpt", "value": "Yes"}]}
]`
	p := writeFile(t, "sg.json", body)
	tok := tokenizer.Default()
	run := func(o VLLMShareGPTOptions) ([]Conversation, map[string]string) {
		t.Helper()
		o.Path, o.Tokenizer = p, tok
		s, err := NewVLLMShareGPT(o)
		if err != nil {
			t.Fatal(err)
		}
		convs, err := s.Conversations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return convs, s.Report()
	}
	convs, rep := run(VLLMShareGPTOptions{Count: 10, NoOversample: true})
	if len(convs) != 1 || rep["usable_records"] != "4" || rep["invalid"] != "3" {
		t.Fatalf("%d requests, report %v; want 1 (record a), 4 usable, 3 invalid", len(convs), rep)
	}
	if c := convs[0][0]; !strings.HasPrefix(c.Messages[0].Content, "An answer") || c.ReferenceAnswer != "and a question that follows it now" ||
		int(c.OutputTokens) != tok.Count(c.ReferenceAnswer) {
		t.Errorf("request %+v: want the first message as prompt, the second as answer", c)
	}
	// a forced output length skips the answer's minimum: tiny-answer counts
	convs, rep = run(VLLMShareGPTOptions{Count: 5, OutputLen: 100, Seed: 1})
	if len(convs) != 5 || rep["sampled"] != "2" || rep["oversampled"] != "3" {
		t.Fatalf("%d requests, report %v; want 5 (2 sampled, 3 repeated)", len(convs), rep)
	}
	ids := map[string]bool{}
	for _, c := range convs {
		ids[c[0].ConversationID] = true
		if c[0].OutputTokens != 100 {
			t.Errorf("%s: %d output tokens", c[0].ConversationID, c[0].OutputTokens)
		}
	}
	if len(ids) != 5 {
		t.Errorf("ids %v are not unique", ids)
	}
	// prompt + output above 2048 is invalid even when forced
	convs, _ = run(VLLMShareGPTOptions{Count: 5, OutputLen: 2045, NoOversample: true})
	if len(convs) != 0 {
		t.Errorf("%d requests with prompt + 2045 output; want none past 2048", len(convs))
	}
}

func TestRandomRefuses(t *testing.T) {
	c := importCorpus(t)
	for _, o := range []RandomOptions{
		{Corpus: c, Count: 1, InputLen: 10, OutputLen: 1, RangeRatio: 1},
		{Corpus: c, Count: 1, InputLen: 1, OutputLen: 1, RangeRatio: 0.5},
		{Corpus: c, Count: 0, InputLen: 10, OutputLen: 1},
	} {
		if _, err := NewRandom(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
