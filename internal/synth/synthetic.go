package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// SyntheticOptions configure a Synthetic source.
type SyntheticOptions struct {
	Corpus             *Corpus
	Count              int  // conversations to make, >= 1
	Turns              Dist // user turns (requests) per conversation; must reach 1
	InputTokens        Dist // tokens per user message; must reach 1
	OutputTokens       Dist // max_tokens per turn; must reach 1
	PrefixTokens       Dist // per-conversation prefix (system message), drawn per conversation; nil means none
	CommonPrefixTokens Dist // prefix shared by all conversations, drawn once; nil means none
	ThinkTime          Dist // seconds before turns k > 0; nil means 0
	// Layout places the prefixes in turn 0: LayoutSystem (the zero
	// value) or LayoutVLLM.
	Layout Layout
	Seed   int64
	// MaxBytes refuses a trace whose text is estimated above it (see
	// Synthetic.EstimatedBytes); 0 means no limit.
	MaxBytes int64
	// Progress is called with conversations done of Count; may be nil.
	Progress func(done, total int64)
}

// Layout is where turn 0's prefixes go and whether they count inside its
// InputTokens draw.
type Layout string

const (
	// LayoutSystem: a system message of common prefix + conversation
	// prefix, then a user message of the full InputTokens draw. Turn 0
	// has common + prefix + input tokens.
	LayoutSystem Layout = "system"
	// LayoutVLLM is vLLM's multi-turn generator (bench_dataset.py): one
	// user message of common prefix, conversation marker, conversation
	// prefix and filler text. The common prefix and the marker count
	// inside the InputTokens draw, the conversation prefix on top of it:
	// turn 0 has max(input, common + marker) + prefix tokens.
	LayoutVLLM Layout = "vllm"
)

// Synthetic builds conversations from a Corpus with token-exact lengths,
// like vLLM's multi-turn generator.
//
// Conversation i (id "conv-<i>", zero-padded) has Turns user turns. Turn 0
// carries a system message when CommonPrefixTokens or PrefixTokens is
// non-zero: the common prefix (the same text in every conversation,
// drawn once) followed by the conversation's own prefix, which starts with
// a " Conversation <i>." marker so that no two conversations share more
// than the common prefix. Without a conversation prefix the marker opens
// the first user message instead. Each user message has InputTokens
// tokens; OutputTokens is sent as max_tokens and is the length of the
// reference answer (corpus text, used by replay's --history reference).
// Turn k > 0 waits ThinkTime (seconds) after the previous response.
// Layout LayoutVLLM puts turn 0's prefixes in its user message instead
// (see LayoutVLLM).
//
// Every message is cut from the corpus at word boundaries, so it starts
// with a space; its Tokens field is exact under the corpus's tokenizer.
// Each conversation draws from its own generator seeded by (Seed, i), so
// conversation i does not change when Count grows.
type Synthetic struct {
	Opts SyntheticOptions
}

var (
	_ Source   = (*Synthetic)(nil)
	_ Reporter = (*Synthetic)(nil)
)

// NewSynthetic checks o and returns the source.
func NewSynthetic(o SyntheticOptions) (*Synthetic, error) {
	s := &Synthetic{Opts: o}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Synthetic) Name() string { return "synthetic" }

// Report names the corpus's quirks: its text's bytes that were not UTF-8
// and were dropped ("text_invalid_utf8_bytes", only when there were some).
func (s *Synthetic) Report() map[string]string {
	m := map[string]string{}
	if s.Opts.Corpus != nil {
		addUTF8Report(m, reportTextInvalidUTF8, s.Opts.Corpus.InvalidUTF8())
	}
	return m
}

func (s *Synthetic) validate() error {
	o := s.Opts
	if o.Corpus == nil {
		return fieldErr("SyntheticOptions", "Corpus", "no corpus")
	}
	if o.Count <= 0 {
		return fieldErr("SyntheticOptions", "Count", "%d conversations, want at least 1", o.Count)
	}
	if o.Layout != "" && o.Layout != LayoutSystem && o.Layout != LayoutVLLM {
		return fieldErr("SyntheticOptions", "Layout", "%q, want %q or %q", o.Layout, LayoutSystem, LayoutVLLM)
	}
	for _, c := range []struct {
		field string
		d     Dist
		lo    float64
	}{{"Turns", o.Turns, 1}, {"InputTokens", o.InputTokens, 1}, {"OutputTokens", o.OutputTokens, 1}} {
		if err := checkCount("SyntheticOptions", c.field, c.d, c.lo); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		field string
		d     Dist
	}{{"PrefixTokens", o.PrefixTokens}, {"CommonPrefixTokens", o.CommonPrefixTokens}} {
		if c.d != nil {
			if err := checkCount("SyntheticOptions", c.field, c.d, 0); err != nil {
				return err
			}
		}
	}
	return checkSize("SyntheticOptions", s.EstimatedBytes(), o.MaxBytes,
		fmt.Sprintf("%d conversations x %.3g turns x (%.4g input + %.4g output tokens)",
			o.Count, distMean(o.Turns), distMean(o.InputTokens), distMean(o.OutputTokens)))
}

// EstimatedBytes is the expected size of the text the trace holds, from
// the distributions' means m and the corpus's bytes per token b:
//
//	Count * (m(Turns) * (m(InputTokens) + m(OutputTokens)) + m(PrefixTokens) + m(CommonPrefixTokens)) * b
//
// (the output tokens are the reference answers' length).
func (s *Synthetic) EstimatedBytes() float64 {
	o := s.Opts
	if o.Corpus == nil {
		return 0
	}
	perTurn := max(distMean(o.InputTokens), 1) + max(distMean(o.OutputTokens), 1)
	perConv := max(distMean(o.Turns), 1)*perTurn + distMean(o.PrefixTokens) + distMean(o.CommonPrefixTokens)
	return float64(max(o.Count, 0)) * perConv * o.Corpus.BytesPerToken()
}

// Conversations generates the conversations; start offsets are left zero
// for a Schedule.
func (s *Synthetic) Conversations(ctx context.Context) ([]Conversation, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("synthetic source: %w", err)
	}
	o := s.Opts
	r := rand.New(rand.NewPCG(uint64(o.Seed), math.MaxUint64))
	common := ""
	commonTokens := 0
	if o.CommonPrefixTokens != nil {
		commonTokens = sampleInt(o.CommonPrefixTokens, r)
		common = o.Corpus.Text(r.IntN(o.Corpus.Tokens()), commonTokens)
	}
	width := len(strconv.Itoa(o.Count - 1))
	convs := make([]Conversation, o.Count)
	for i := range convs {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if o.Progress != nil {
				o.Progress(int64(i), int64(o.Count))
			}
		}
		convs[i] = s.conversation(i, width, common, commonTokens)
	}
	if o.Progress != nil {
		o.Progress(int64(o.Count), int64(o.Count))
	}
	return convs, nil
}

func (s *Synthetic) conversation(i, width int, common string, commonTokens int) Conversation {
	o := &s.Opts
	r := rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)))
	c := o.Corpus
	id := fmt.Sprintf("conv-%0*d", width, i)
	turns := max(sampleInt(o.Turns, r), 1)
	pos := r.IntN(c.Tokens()) // where this conversation reads the corpus
	take := func(n int) string {
		t := c.Text(pos, n)
		pos += n
		return t
	}
	marker := " Conversation " + strconv.Itoa(i) + "."
	markerTokens := c.Tokenizer().Count(marker)

	conv := make(Conversation, turns)
	for k := range conv {
		t := &conv[k]
		t.ConversationID = id
		t.Turn = int32(k)
		if k > 0 && o.ThinkTime != nil {
			t.ThinkTimeNs = int64(math.Round(max(o.ThinkTime.Sample(r), 0) * 1e9))
		}
		userTokens := max(sampleInt(o.InputTokens, r), 1)
		outTokens := max(sampleInt(o.OutputTokens, r), 1)
		msgs := make([]trace.Message, 0, 2)
		markerPlaced := false
		if k == 0 && o.Layout == LayoutVLLM {
			prefix := 0
			if o.PrefixTokens != nil {
				prefix = sampleInt(o.PrefixTokens, r)
			}
			// common + marker inside the budget, the prefix on top
			head := commonTokens + markerTokens
			fill := max(userTokens-head, 0)
			user := common + marker + take(prefix) + take(fill)
			userTokens = head + prefix + fill
			msgs = append(msgs, trace.Message{Role: "user", Content: user, Tokens: int32(userTokens)})
			t.Messages = msgs
			t.InputTokens = int32(userTokens)
			t.OutputTokens = int32(outTokens)
			t.ReferenceAnswer = c.Text(r.IntN(c.Tokens()), outTokens)
			continue
		}
		if k == 0 {
			prefix := 0
			if o.PrefixTokens != nil {
				prefix = sampleInt(o.PrefixTokens, r)
			}
			if commonTokens+prefix > 0 {
				sys, n := common, commonTokens
				if prefix > markerTokens {
					sys += marker + take(prefix-markerTokens)
					n += prefix
					markerPlaced = true
				} else if prefix > 0 {
					sys += take(prefix)
					n += prefix
				}
				msgs = append(msgs, trace.Message{Role: "system", Content: sys, Tokens: int32(n)})
			}
		}
		var user string
		if k == 0 && !markerPlaced && userTokens > markerTokens {
			user = marker + take(userTokens-markerTokens)
		} else {
			user = take(userTokens)
		}
		msgs = append(msgs, trace.Message{Role: "user", Content: user, Tokens: int32(userTokens)})
		t.Messages = msgs
		for _, m := range msgs {
			t.InputTokens += m.Tokens
		}
		t.OutputTokens = int32(outTokens)
		t.ReferenceAnswer = c.Text(r.IntN(c.Tokens()), outTokens)
	}
	return conv
}

// Defaults of the synthetic source's flags: vLLM's example
// generate_multi_turn.json in tracekit's terms (num_turns 12-18 messages is
// 6-9 user turns), without its prefixes.
const (
	DefaultConversations = 100
	DefaultTurns         = "6-9"
	DefaultInputTokens   = "120-160"
	DefaultOutputTokens  = "80-120"
)

// resolveNear resolves a path named in a config file: as given when it
// exists, else relative to the config file's folder (vLLM resolves
// against the working directory; the second chance helps when the config
// lives beside its text).
func resolveNear(config, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return filepath.Join(filepath.Dir(config), p)
}

// CorpusFromFiles builds a corpus of the files' texts, each followed by a
// newline (vLLM's text_files).
func CorpusFromFiles(paths []string, tok tokenizer.Tokenizer) (*Corpus, error) {
	var b strings.Builder
	for _, p := range paths {
		data, err := ReadInput(p)
		if err != nil {
			return nil, fmt.Errorf("reading text file: %w", err)
		}
		b.Write(data)
		b.WriteString("\n")
	}
	c, err := NewCorpus(b.String(), tok)
	if err != nil {
		return nil, fmt.Errorf("text files %s: %w", strings.Join(paths, ", "), err)
	}
	return c, nil
}
