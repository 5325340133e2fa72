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

	"github.com/spf13/pflag"

	"github.com/tracekit/tracekit/trace"
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
//
// Every message is cut from the corpus at word boundaries, so it starts
// with a space; its Tokens field is exact under the corpus's tokenizer.
// Each conversation draws from its own generator seeded by (Seed, i), so
// conversation i does not change when Count grows.
type Synthetic struct {
	Corpus             *Corpus
	Count              int  // conversations to make
	Turns              Dist // user turns (requests) per conversation, >= 1
	InputTokens        Dist // tokens per user message, >= 1
	OutputTokens       Dist // max_tokens per turn, >= 1
	PrefixTokens       Dist // per-conversation prefix (system message), drawn per conversation
	CommonPrefixTokens Dist // prefix shared by all conversations, drawn once
	ThinkTime          Dist // seconds before turns k > 0; nil means 0
	Seed               int64
	// Progress is called with conversations done of Conversations; may
	// be nil.
	Progress func(done, total int64)
}

var _ Source = (*Synthetic)(nil)

func (s *Synthetic) Name() string { return "synthetic" }

// Conversations generates the conversations; start offsets are left zero
// for a Schedule.
func (s *Synthetic) Conversations(ctx context.Context) ([]Conversation, error) {
	if s.Corpus == nil {
		return nil, fmt.Errorf("synthetic source: no corpus")
	}
	if s.Count <= 0 {
		return nil, fmt.Errorf("synthetic source: %d conversations, want at least 1", s.Count)
	}
	for name, d := range map[string]Dist{"turns": s.Turns, "input tokens": s.InputTokens, "output tokens": s.OutputTokens} {
		if d == nil {
			return nil, fmt.Errorf("synthetic source: no %s distribution", name)
		}
	}
	r := rand.New(rand.NewPCG(uint64(s.Seed), math.MaxUint64))
	common := ""
	commonTokens := 0
	if s.CommonPrefixTokens != nil {
		commonTokens = sampleInt(s.CommonPrefixTokens, r)
		common = s.Corpus.Text(r.IntN(s.Corpus.Tokens()), commonTokens)
	}
	width := len(strconv.Itoa(s.Count - 1))
	convs := make([]Conversation, s.Count)
	for i := range convs {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if s.Progress != nil {
				s.Progress(int64(i), int64(s.Count))
			}
		}
		convs[i] = s.conversation(i, width, common, commonTokens)
	}
	if s.Progress != nil {
		s.Progress(int64(s.Count), int64(s.Count))
	}
	return convs, nil
}

func (s *Synthetic) conversation(i, width int, common string, commonTokens int) Conversation {
	r := rand.New(rand.NewPCG(uint64(s.Seed), uint64(i)))
	c := s.Corpus
	id := fmt.Sprintf("conv-%0*d", width, i)
	turns := max(sampleInt(s.Turns, r), 1)
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
		if k > 0 && s.ThinkTime != nil {
			t.ThinkTimeNs = int64(math.Round(max(s.ThinkTime.Sample(r), 0) * 1e9))
		}
		userTokens := max(sampleInt(s.InputTokens, r), 1)
		outTokens := max(sampleInt(s.OutputTokens, r), 1)
		msgs := make([]trace.Message, 0, 2)
		markerPlaced := false
		if k == 0 {
			prefix := 0
			if s.PrefixTokens != nil {
				prefix = sampleInt(s.PrefixTokens, r)
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

func init() {
	Register(Registration{
		Name:    "synthetic",
		Summary: "conversations of corpus text with token-exact lengths drawn from distributions",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("turns", DefaultTurns, "user turns (requests) per conversation: a distribution; for sharegpt a MIN-MAX filter")
			fs.String("input-tokens", DefaultInputTokens, "tokens per user message: a distribution; for sharegpt a MIN-MAX filter")
			fs.String("output-tokens", DefaultOutputTokens, "max_tokens per turn (reference answer length): a distribution; for sharegpt a MIN-MAX filter")
			fs.String("prefix-tokens", "0", "per-conversation prefix tokens (system message of turn 0): a distribution")
			fs.String("common-prefix-tokens", "0", "prefix tokens shared by all conversations: a distribution drawn once")
			fs.String("think-time", "0s", "user think time before turns 2..n: a distribution of durations, e.g. lognormal:average=5s")
			fs.String("config", "", "vLLM multi-turn generation config JSON (generate_multi_turn.json); flags given explicitly override it")
		},
		New: newSyntheticFromEnv,
	})
}

// newSyntheticFromEnv builds a Synthetic from the command's flags and an
// optional vLLM config.
func newSyntheticFromEnv(env Env) (Source, error) {
	fs := env.Flags
	s := &Synthetic{Count: DefaultConversations, Seed: env.Seed, Progress: env.Progress}
	dists := []struct {
		flag string
		unit Unit
		dst  *Dist
	}{
		{"turns", Count, &s.Turns},
		{"input-tokens", Count, &s.InputTokens},
		{"output-tokens", Count, &s.OutputTokens},
		{"prefix-tokens", Count, &s.PrefixTokens},
		{"common-prefix-tokens", Count, &s.CommonPrefixTokens},
		{"think-time", Seconds, &s.ThinkTime},
	}
	var textFiles []string
	if path, _ := fs.GetString("config"); path != "" {
		cfg, err := ReadVLLMConfig(path)
		if err != nil {
			return nil, err
		}
		if cfg.Conversations > 0 {
			s.Count = cfg.Conversations
		}
		s.Turns, s.InputTokens, s.OutputTokens = cfg.Turns, cfg.InputTokens, cfg.OutputTokens
		s.PrefixTokens, s.CommonPrefixTokens = cfg.PrefixTokens, cfg.CommonPrefixTokens
		for _, f := range cfg.TextFiles {
			textFiles = append(textFiles, resolveNear(path, f))
		}
	}
	for _, d := range dists {
		if *d.dst != nil && !fs.Changed(d.flag) {
			continue // from --config
		}
		spec, _ := fs.GetString(d.flag)
		v, err := ParseDist(spec, d.unit)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", d.flag, err)
		}
		*d.dst = v
	}
	if env.Conversations > 0 {
		s.Count = env.Conversations
	}
	var err error
	if len(textFiles) > 0 && !fs.Changed("text-file") {
		s.Corpus, err = corpusFromFiles(textFiles, env)
	} else {
		s.Corpus, err = env.Corpus()
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

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

func corpusFromFiles(paths []string, env Env) (*Corpus, error) {
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading text file: %w", err)
		}
		b.Write(data)
		b.WriteString("\n")
	}
	c, err := NewCorpus(b.String(), env.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("text files %s: %w", strings.Join(paths, ", "), err)
	}
	return c, nil
}
