package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/tracekit/tracekit/internal/tokenizer"
	"github.com/tracekit/tracekit/trace"
)

// vLLM bench serve's ShareGPT validity filter (vllm/benchmarks/
// dataset_utils.py is_valid_sequence): prompt and answer at least
// vllmMinLen tokens (the answer's minimum is not checked when an output
// length is forced), prompt at most vllmMaxPrompt, prompt + output at most
// vllmMaxTotal.
const (
	vllmMinLen    = 4
	vllmMaxPrompt = 1024
	vllmMaxTotal  = 2048
)

// VLLMDefaultPrompts is vLLM bench serve's --num-prompts default: the
// requests of its datasets when no count is given.
const VLLMDefaultPrompts = 1000

// VLLMShareGPTOptions configure a VLLMShareGPT source.
type VLLMShareGPTOptions struct {
	Path      string
	Tokenizer tokenizer.Tokenizer
	Count     int // requests (vLLM's --num-prompts), >= 1
	Seed      int64
	// OutputLen forces every request's max_tokens (--sharegpt-output-len);
	// 0 uses the answer's token count.
	OutputLen int
	// NoOversample keeps fewer than Count requests when the file has
	// fewer valid ones (--no-oversample); by default some are repeated.
	NoOversample bool
	// NoShuffle keeps file order (--disable-shuffle).
	NoShuffle bool
	MaxBytes  int64
	Progress  func(done, total int64)
}

// VLLMShareGPT samples a ShareGPT file the way vLLM bench serve does
// (vllm/benchmarks/datasets.py ShareGPTDataset), one single-turn request
// per record:
//   - records with a "conversations" list of at least 2 messages are kept
//     and shuffled with Seed (tracekit's generator, not Python's: the same
//     rule, not the same order);
//   - each gives one request: the first message's value is the prompt and
//     the second's the answer, whatever their roles;
//   - a request is kept when valid (prompt 4..1024 tokens, answer at least
//     4 unless OutputLen is set, prompt + output <= 2048), until Count;
//   - when fewer than Count are valid, requests drawn at random (with
//     Seed) from the kept ones are repeated until Count, unless
//     NoOversample.
//
// Token counts are the Tokenizer's (vLLM counts with the model's, special
// tokens included). Start offsets are left for a Schedule.
type VLLMShareGPT struct {
	Opts   VLLMShareGPTOptions
	report map[string]int
}

var (
	_ Source   = (*VLLMShareGPT)(nil)
	_ Reporter = (*VLLMShareGPT)(nil)
)

// NewVLLMShareGPT checks o and returns the source.
func NewVLLMShareGPT(o VLLMShareGPTOptions) (*VLLMShareGPT, error) {
	const st = "VLLMShareGPTOptions"
	switch {
	case o.Path == "":
		return nil, fieldErr(st, "Path", "no input file")
	case o.Tokenizer == nil:
		return nil, fieldErr(st, "Tokenizer", "no tokenizer")
	case o.Count < 1:
		return nil, fieldErr(st, "Count", "%d requests, want at least 1", o.Count)
	case o.OutputLen < 0 || o.OutputLen > maxTokens:
		return nil, fieldErr(st, "OutputLen", "%d, want 0 (the answer's length) or a token count", o.OutputLen)
	}
	return &VLLMShareGPT{Opts: o}, nil
}

func (s *VLLMShareGPT) Name() string { return "vllm-sharegpt" }

// Report counts records read, usable, requests kept, invalid by vLLM's
// filter, and repeated by oversampling.
func (s *VLLMShareGPT) Report() map[string]string {
	out := make(map[string]string, len(s.report))
	for k, v := range s.report {
		out[k] = strconv.Itoa(v)
	}
	return out
}

type vllmPair struct{ prompt, answer string }

func (s *VLLMShareGPT) Conversations(ctx context.Context) ([]Conversation, error) {
	o := s.Opts
	s.report = map[string]int{}
	reader := &ShareGPT{Opts: ShareGPTOptions{Path: o.Path, Tokenizer: o.Tokenizer, MaxBytes: o.MaxBytes, Progress: o.Progress},
		report: s.report}
	var pairs []vllmPair
	err := reader.eachRecord(ctx, func(_ int, rec *sharegptRecord) {
		s.report["records"]++
		if len(rec.Conversations) < 2 {
			return
		}
		pairs = append(pairs, vllmPair{rec.Conversations[0].Value, rec.Conversations[1].Value})
	})
	if err != nil {
		return nil, err
	}
	s.report["usable_records"] = len(pairs)
	r := rand.New(rand.NewPCG(uint64(o.Seed), 0x7611))
	if !o.NoShuffle {
		r.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	}
	var kept []trace.Turn
	for i, p := range pairs {
		if len(kept) >= o.Count {
			break
		}
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		in := o.Tokenizer.Count(p.prompt)
		out := o.OutputLen
		if out == 0 {
			out = o.Tokenizer.Count(p.answer)
		}
		if in < vllmMinLen || (o.OutputLen == 0 && out < vllmMinLen) || in > vllmMaxPrompt || in+out > vllmMaxTotal {
			s.report["invalid"]++
			continue
		}
		kept = append(kept, trace.Turn{
			Messages:        []trace.Message{{Role: "user", Content: p.prompt, Tokens: int32(in)}},
			InputTokens:     int32(in),
			OutputTokens:    int32(out),
			ReferenceAnswer: p.answer,
		})
	}
	s.report["sampled"] = len(kept)
	if len(kept) == 0 {
		return nil, nil
	}
	n := len(kept)
	if !o.NoOversample {
		for len(kept) < o.Count {
			kept = append(kept, kept[r.IntN(n)])
		}
		s.report["oversampled"] = len(kept) - n
	}
	return singleTurns("req", kept), nil
}

// singleTurns makes one conversation of each turn, ids "<prefix>-<i>"
// zero-padded, with its own copy of the messages.
func singleTurns(prefix string, turns []trace.Turn) []Conversation {
	width := len(strconv.Itoa(len(turns) - 1))
	convs := make([]Conversation, len(turns))
	for i, t := range turns {
		t.ConversationID = fmt.Sprintf("%s-%0*d", prefix, width, i)
		t.Turn = 0
		t.Messages = append([]trace.Message(nil), t.Messages...)
		convs[i] = Conversation{t}
	}
	return convs
}

// RandomOptions configure a Random source (vLLM bench serve's random
// dataset).
type RandomOptions struct {
	Corpus     *Corpus
	Count      int     // requests (--num-prompts), >= 1
	InputLen   int     // --random-input-len
	OutputLen  int     // --random-output-len
	RangeRatio float64 // --random-range-ratio, in [0, 1)
	PrefixLen  int     // --random-prefix-len: tokens shared by every prompt
	Seed       int64
	MaxBytes   int64
}

// Random is vLLM's random dataset (vllm/benchmarks/datasets.py
// RandomDataset) over corpus text: request i has a prompt of
//
//	PrefixLen + U{floor(InputLen*(1-r)), ceil(InputLen*(1+r))}
//
// tokens (the prefix text is drawn once and opens every prompt) and
// max_tokens U{max(floor(OutputLen*(1-r)), 1), max(ceil(OutputLen*(1+r)), 1)},
// r = RangeRatio, integer-uniform and inclusive. vLLM's prompts are runs
// of token ids; these are corpus text with the same exact counts (no
// special tokens are subtracted: a chat request has none in its text).
type Random struct {
	Opts RandomOptions
}

var _ Source = (*Random)(nil)

// NewRandom checks o and returns the source.
func NewRandom(o RandomOptions) (*Random, error) {
	const st = "RandomOptions"
	switch {
	case o.Corpus == nil:
		return nil, fieldErr(st, "Corpus", "no corpus")
	case o.Count < 1:
		return nil, fieldErr(st, "Count", "%d requests, want at least 1", o.Count)
	case !(o.RangeRatio >= 0 && o.RangeRatio < 1):
		return nil, fieldErr(st, "RangeRatio", "%g, want 0 <= ratio < 1", o.RangeRatio)
	case o.InputLen < 0 || o.PrefixLen < 0:
		return nil, fieldErr(st, "InputLen", "input %d and prefix %d must not be negative", o.InputLen, o.PrefixLen)
	case o.OutputLen < 1:
		return nil, fieldErr(st, "OutputLen", "%d, want at least 1", o.OutputLen)
	}
	r := &Random{Opts: o}
	inLo, inHi, _, outHi := r.bounds()
	if o.PrefixLen+inLo < 1 {
		return nil, fieldErr(st, "InputLen", "%d with range ratio %g and prefix %d can give an empty prompt", o.InputLen, o.RangeRatio, o.PrefixLen)
	}
	if o.PrefixLen+inHi > maxTokens || outHi > maxTokens {
		return nil, fieldErr(st, "InputLen", "lengths above the %d a trace stores", maxTokens)
	}
	est := float64(o.Count) * (float64(o.PrefixLen+o.InputLen) + float64(o.OutputLen)) * o.Corpus.BytesPerToken()
	if err := checkSize(st, est, o.MaxBytes, fmt.Sprintf("%d requests x %d tokens", o.Count, o.PrefixLen+o.InputLen+o.OutputLen)); err != nil {
		return nil, err
	}
	return r, nil
}

func (s *Random) Name() string { return "vllm-random" }

// bounds are the inclusive ranges of input and output lengths.
func (s *Random) bounds() (inLo, inHi, outLo, outHi int) {
	o := s.Opts
	inLo = int(math.Floor(float64(o.InputLen) * (1 - o.RangeRatio)))
	inHi = int(math.Ceil(float64(o.InputLen) * (1 + o.RangeRatio)))
	outLo = max(int(math.Floor(float64(o.OutputLen)*(1-o.RangeRatio))), 1)
	outHi = max(int(math.Ceil(float64(o.OutputLen)*(1+o.RangeRatio))), 1)
	return
}

func (s *Random) Conversations(ctx context.Context) ([]Conversation, error) {
	o := s.Opts
	c := o.Corpus
	r := rand.New(rand.NewPCG(uint64(o.Seed), 0x4a2d))
	prefix := c.Text(r.IntN(c.Tokens()), o.PrefixLen)
	inLo, inHi, outLo, outHi := s.bounds()
	turns := make([]trace.Turn, o.Count)
	for i := range turns {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		n := inLo + r.IntN(inHi-inLo+1)
		out := outLo + r.IntN(outHi-outLo+1)
		in := o.PrefixLen + n
		turns[i] = trace.Turn{
			Messages:        []trace.Message{{Role: "user", Content: prefix + c.Text(r.IntN(c.Tokens()), n), Tokens: int32(in)}},
			InputTokens:     int32(in),
			OutputTokens:    int32(out),
			ReferenceAnswer: c.Text(r.IntN(c.Tokens()), out),
		}
	}
	return singleTurns("req", turns), nil
}
