package synth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/trace"
)

func TestPoolingShapes(t *testing.T) {
	c := importCorpus(t)
	tok := c.Tokenizer()
	emb, err := NewPooling(PoolingOptions{Endpoint: trace.EndpointEmbeddings, Corpus: c, Count: 4,
		BatchSize: Constant{V: 2}, InputTokens: Uniform{Min: 3, Max: 9}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	convs, err := emb.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 4 {
		t.Fatalf("%d conversations", len(convs))
	}
	for _, cv := range convs {
		r := cv[0]
		if len(cv) != 1 || r.Endpoint != trace.EndpointEmbeddings || len(r.Messages) != 2 || r.OutputTokens != 0 {
			t.Fatalf("%+v", cv)
		}
		sum := int32(0)
		for _, m := range r.Messages {
			if m.Role != trace.RoleInput || m.Tokens < 3 || m.Tokens > 9 || tok.Count(m.Content) != int(m.Tokens) {
				t.Fatalf("%s: %s of %d tokens, text %d", r.ConversationID, m.Role, m.Tokens, tok.Count(m.Content))
			}
			sum += m.Tokens
		}
		if r.InputTokens != sum {
			t.Fatalf("%s: input %d, messages %d", r.ConversationID, r.InputTokens, sum)
		}
	}
	// request i does not change when Count grows
	more := *emb
	more.Opts.Count = 9
	convs9, err := more.Conversations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if convs9[2][0].Messages[1].Content != convs[2][0].Messages[1].Content {
		t.Error("request 2 changed with Count")
	}
}

func TestPoolingRefuses(t *testing.T) {
	c := importCorpus(t)
	for _, tc := range []struct {
		o     PoolingOptions
		field string
	}{
		{PoolingOptions{Endpoint: trace.EndpointChat, Corpus: c, Count: 1}, "Endpoint"},
		{PoolingOptions{Endpoint: trace.EndpointEmbeddings, Count: 1}, "Corpus"},
		{PoolingOptions{Endpoint: trace.EndpointEmbeddings, Corpus: c}, "Count"},
		{PoolingOptions{Endpoint: trace.EndpointEmbeddings, Corpus: c, Count: 1, BatchSize: Constant{V: 0}, InputTokens: Constant{V: 1}}, "BatchSize"},
		{PoolingOptions{Endpoint: trace.EndpointRerank, Corpus: c, Count: 1, Documents: Constant{V: 1}, QueryTokens: Constant{V: 1}}, "DocumentTokens"},
		{PoolingOptions{Endpoint: trace.EndpointScore, Corpus: c, Count: 1000, Documents: Constant{V: 100}, QueryTokens: Constant{V: 1},
			DocumentTokens: Constant{V: 1000}, MaxBytes: 1 << 20}, "MaxBytes"},
	} {
		_, err := NewPooling(tc.o)
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a field error on %s", tc.o, err, tc.field)
		}
	}
}

// VLLMSpan: one gap per conversation, the first before conversation 0,
// the last start at exactly N/Rate.
func TestScheduleVLLMSpan(t *testing.T) {
	convs := make([]Conversation, 40)
	for i := range convs {
		convs[i] = Conversation{{ConversationID: strings.Repeat("x", i+1)}}
	}
	Schedule{Rate: 8, Burstiness: 0.5, VLLMSpan: true}.Apply(convs, 3)
	prev := int64(0)
	for i, c := range convs {
		at := c[0].StartOffsetNs
		if at < prev || (i == 0 && at <= 0) || c[0].ArrivalOffsetNs != at {
			t.Fatalf("conversation %d starts at %d after %d", i, at, prev)
		}
		prev = at
	}
	if prev != 5e9 {
		t.Errorf("last start %d ns, want 40/8 s", prev)
	}
	Schedule{Rate: 0, VLLMSpan: true}.Apply(convs, 3)
	for i, c := range convs {
		if c[0].StartOffsetNs != 0 {
			t.Fatalf("rate 0: conversation %d starts at %d", i, c[0].StartOffsetNs)
		}
	}
}
