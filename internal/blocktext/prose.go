package blocktext

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tracekit/tracekit/internal/tokenizer"
)

// The default corpus is prose the project generates itself: sentences built
// from templates over a small hand-written vocabulary by a fixed-seed
// generator, so it is English-like (word lengths, punctuation, paragraph
// breaks, a realistic tokens-per-word ratio) without copying any book.

// defaultProseWords is the default corpus length in words (about 1.3
// tokens per word under o200k_base).
const defaultProseWords = 60000

var (
	proseOnce sync.Once
	proseText string
)

// DefaultProse returns the generated default corpus text. It is the same
// on every call and every machine.
func DefaultProse() string {
	proseOnce.Do(func() { proseText = generateProse(defaultProseWords, 0x7261636b) })
	return proseText
}

// defaultCorpora holds the default corpus under each embedded tokenizer,
// built once per process (a Corpus is safe for concurrent use).
var defaultCorpora sync.Map // tokenizer name -> *Corpus

// DefaultCorpus returns the default corpus under tok. Under an embedded
// tokenizer (o200k_base, cl100k_base: a name always means the same
// encoding) it is built once per process and shared.
func DefaultCorpus(tok tokenizer.Tokenizer) (*Corpus, error) {
	name := tok.Name()
	embedded := name == tokenizer.DefaultName || name == "cl100k_base"
	if embedded {
		if c, ok := defaultCorpora.Load(name); ok {
			return c.(*Corpus), nil
		}
	}
	c, err := NewCorpus(DefaultProse(), tok)
	if err != nil || !embedded {
		return c, err
	}
	c.isDefault = true
	got, _ := defaultCorpora.LoadOrStore(name, c)
	return got.(*Corpus), nil
}

// IsDefault reports whether c is the default corpus under an embedded
// tokenizer: text made from it can be named (DefaultBlocks) instead of
// stored.
func (c *Corpus) IsDefault() bool { return c.isDefault }

type blocksKey struct {
	tok  string
	size int
}

var defaultBlocks sync.Map // blocksKey -> *Blocks

// DefaultBlocks returns Blocks of size tokens over the default corpus
// under the embedded tokenizer named tok (o200k_base, cl100k_base), built
// once per process: what synth's imports cut their prompts from, and what
// replay makes virtual prompts with.
func DefaultBlocks(tok string, size int) (*Blocks, error) {
	if b, ok := defaultBlocks.Load(blocksKey{tok, size}); ok {
		return b.(*Blocks), nil
	}
	if tok != tokenizer.DefaultName && tok != "cl100k_base" {
		return nil, fmt.Errorf("the default prompt blocks exist under o200k_base and cl100k_base, not %q", tok)
	}
	t, err := tokenizer.Open(tok)
	if err != nil {
		return nil, err
	}
	c, err := DefaultCorpus(t)
	if err != nil {
		return nil, err
	}
	b, err := NewBlocks(c, size)
	if err != nil {
		return nil, err
	}
	got, _ := defaultBlocks.LoadOrStore(blocksKey{tok, size}, b)
	return got.(*Blocks), nil
}

var (
	proseSubjects = []string{
		"the engineer", "the captain", "an old merchant", "the young clerk", "my neighbour",
		"the committee", "a stranger from the north", "the gardener", "the doctor", "our guide",
		"the students", "the baker", "a quiet farmer", "the harbour master", "the teacher",
		"the traveller", "her brother", "the council", "the weaver", "a tired messenger",
		"the librarian", "the miners", "the inspector", "a curious child", "the pilot",
	}
	proseVerbs = []string{
		"carried", "examined", "forgot", "repaired", "described", "measured", "borrowed",
		"painted", "followed", "remembered", "questioned", "delivered", "studied", "ignored",
		"gathered", "promised", "explained", "counted", "watched", "built", "opened",
		"abandoned", "recorded", "protected", "discovered", "sold", "ordered", "returned",
	}
	proseObjects = []string{
		"the letter", "a wooden box", "the old map", "the bridge", "a basket of apples",
		"the ledger", "the evening train", "a broken lantern", "the garden wall", "the contract",
		"a silver coin", "the weather report", "the narrow staircase", "a bundle of keys",
		"the village clock", "the machine", "a pair of boots", "the harvest", "the river road",
		"the schedule", "a stack of papers", "the small boat", "the family portrait", "the well",
	}
	proseAdjectives = []string{
		"quiet", "heavy", "careful", "bright", "ancient", "patient", "strange", "narrow",
		"generous", "cold", "familiar", "distant", "modest", "restless", "simple", "golden",
		"hidden", "crowded", "gentle", "stubborn", "pale", "useful", "uneven", "honest",
	}
	proseNouns = []string{
		"morning", "harbour", "market", "storm", "valley", "window", "journey", "village",
		"winter", "question", "answer", "kitchen", "mountain", "station", "festival", "river",
		"library", "promise", "workshop", "season", "forest", "island", "road", "silence",
	}
	proseAdverbs = []string{
		"slowly", "quickly", "carefully", "again", "quietly", "at last", "without a word",
		"before dawn", "after supper", "once more", "in a hurry", "with great care",
		"for the second time", "as usual", "without complaint", "by the fire",
	}
	proseConnectives = []string{
		"and then", "but", "because", "although", "so", "while", "after which", "until",
	}
	proseOpeners = []string{
		"In the morning", "Later that day", "Some years ago", "By the end of the week",
		"Before the storm", "On the following day", "Not long after", "At the edge of the village",
		"During the festival", "When the train arrived", "For a long time", "That evening",
	}
	proseSayings = []string{
		"said that nothing would change", "asked whether the road was safe",
		"wondered who had left the door open", "insisted that the work was not finished",
		"claimed to have seen it before", "explained how the numbers were counted",
		"replied that it depended on the weather", "admitted that the plan had failed",
	}
)

// rng is splitmix64: tiny, fast and fixed forever, so the default corpus
// never changes with the Go release.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) pick(words []string) string { return words[r.next()%uint64(len(words))] }
func (r *rng) intn(n int) int             { return int(r.next() % uint64(n)) }

// generateProse writes about words words of paragraphs.
func generateProse(words int, seed uint64) string {
	r := &rng{s: seed}
	var b strings.Builder
	b.Grow(words * 7)
	count := 0
	for count < words {
		sentences := 3 + r.intn(6)
		for i := 0; i < sentences; i++ {
			s := proseSentence(r)
			count += strings.Count(s, " ") + 1
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(s)
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

// proseSentence builds one sentence from a template.
func proseSentence(r *rng) string {
	var parts []string
	switch r.intn(6) {
	case 0:
		parts = []string{r.pick(proseOpeners) + ",", r.pick(proseSubjects), r.pick(proseVerbs), r.pick(proseObjects), r.pick(proseAdverbs)}
	case 1:
		parts = []string{r.pick(proseSubjects), r.pick(proseVerbs), r.pick(proseObjects) + ",", r.pick(proseConnectives), r.pick(proseSubjects), r.pick(proseSayings)}
	case 2:
		parts = []string{"The", r.pick(proseNouns), "was", r.pick(proseAdjectives), "and", r.pick(proseAdjectives) + ",", "and", r.pick(proseSubjects), r.pick(proseVerbs), r.pick(proseObjects)}
	case 3:
		parts = []string{r.pick(proseSubjects), r.pick(proseSayings) + ";", r.pick(proseSubjects), r.pick(proseVerbs), r.pick(proseObjects), "near the", r.pick(proseAdjectives), r.pick(proseNouns)}
	case 4:
		n := 12 + r.intn(300)
		parts = []string{"There were", itoa(n), r.pick(proseAdjectives), "reasons to visit the", r.pick(proseNouns) + ",", "and", r.pick(proseSubjects), "knew", itoa(1 + r.intn(9)), "of them"}
	default:
		parts = []string{"\"" + capitalize(r.pick(proseAdverbs)) + ",\"", r.pick(proseSubjects), r.pick(proseSayings) + ",", "\"we", r.pick(proseVerbs), r.pick(proseObjects) + ".\""}
		return capitalize(strings.Join(parts, " "))
	}
	end := "."
	if r.intn(10) == 0 {
		end = "?"
	}
	return capitalize(strings.Join(parts, " ")) + end
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d [20]byte
	i := len(d)
	for n > 0 {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return string(d[i:])
}
