package mock

import (
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/fnv1a"
)

// words is the vocabulary of generated text: each word is at most four
// bytes, so ApproxTokens counts it as one token when it comes back as
// history.
var words = [...]string{
	"the", "of", "and", "to", "in", "is", "it", "you", "that", "was", "for", "on",
	"are", "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or",
	"had", "by", "hot", "word", "but", "what", "some", "we", "can", "out", "were", "all",
	"when", "up", "use", "your", "how", "an", "each", "she", "do", "time", "if", "will",
	"way", "many", "then", "them", "so", "make", "like", "him", "into", "has", "look", "more",
	"go", "see", "no", "most",
}

// splitmix64 is a strong 64-bit mixer, so word choice looks random.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// word returns the text of generated token i: a space and a word chosen
// from (seed, messages hash, i).
func word(seed int64, msgHash uint64, i int) string {
	return words[splitmix64(uint64(seed)^msgHash^splitmix64(uint64(i)))%uint64(len(words))]
}

// GeneratedText is the text the mock answers a request with: tokens words,
// each preceded by a space. messagesHash is the request's messages_hash
// (HashMessages). With finish_reason "stop" the last completion token is
// end-of-text and carries no text, so the text has completion_tokens-1 words.
func GeneratedText(seed int64, messagesHash string, tokens int) (string, error) {
	h, err := hexHash(messagesHash)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i := range tokens {
		b.WriteByte(' ')
		b.WriteString(word(seed, h, i))
	}
	return b.String(), nil
}

// requestRand returns the generator of one request's draws, seeded by the
// configured seed, the request id and the messages hash.
func requestRand(seed int64, id string, msgHash uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), fnv1a.String(id)^msgHash))
}

// logNormal draws a log-normal factor with mean 1 and the given coefficient
// of variation: exp(sigma*Z - sigma^2/2) with sigma^2 = ln(1+cv^2).
func logNormal(rng *rand.Rand, cv float64) float64 {
	if cv == 0 {
		return 1
	}
	s2 := math.Log1p(cv * cv)
	return math.Exp(math.Sqrt(s2)*rng.NormFloat64() - s2/2)
}

// outputLength returns how many tokens to generate and the finish reason:
// maxTokens with "length" under ignore_eos, else a log-normal draw of mean
// OutputMean ending in end-of-text ("stop"), cut at maxTokens ("length").
func (l Latency) outputLength(rng *rand.Rand, maxTokens int, ignoreEOS bool) (int, string) {
	if ignoreEOS {
		return maxTokens, "length"
	}
	n := max(1, int(math.Round(float64(l.OutputMean)*logNormal(rng, l.OutputCV))))
	if n >= maxTokens {
		return maxTokens, "length"
	}
	return n, "stop"
}

// ReasoningHeader sets how many reasoning tokens the answer to a request
// starts with (0 or more, within its max_tokens), whatever
// Latency.ReasoningMean would draw: a test, or a replay of a trace that
// recorded them, knows the count exactly. Completions and requests that
// turn reasoning off get none.
const ReasoningHeader = "X-Tracekit-Reasoning-Tokens"

// reasoningLength draws a request's reasoning tokens: a log-normal of mean
// ReasoningMean, at least 1.
func (l Latency) reasoningLength(rng *rand.Rand) int {
	return max(1, int(math.Round(float64(l.ReasoningMean)*logNormal(rng, l.ReasoningCV))))
}

// prefill is the prefill time of uncached prompt tokens.
func (l Latency) prefill(uncached int) time.Duration {
	return l.PrefillBase.D() + time.Duration(uncached)*l.PrefillPerToken.D()
}

// itl is one inter-token time with running sequences in the batch.
func (l Latency) itl(rng *rand.Rand, running int) time.Duration {
	base := l.DecodeBase.D() + time.Duration(max(running-1, 0))*l.DecodePerSeq.D()
	return time.Duration(float64(base) * logNormal(rng, l.JitterCV))
}

// maxSpecK bounds Latency.SpecK (vLLM's num_speculative_tokens is single
// digits in practice).
const maxSpecK = 64

// specAccepted is how many of k draft tokens the speculative step at
// output token tok accepts: each in turn with probability p until the
// first rejection. It is a pure function of (seed, tok), so planning the
// events and streaming them draw the same steps.
func specAccepted(seed uint64, tok, k int, p float64) int {
	z := seed ^ uint64(tok)*0x9e3779b97f4a7c15
	for i := range k {
		z += 0x9e3779b97f4a7c15 // splitmix64
		v := z
		v = (v ^ v>>30) * 0xbf58476d1ce4e5b9
		v = (v ^ v>>27) * 0x94d049bb133111eb
		v ^= v >> 31
		if float64(v>>11)/(1<<53) >= p {
			return i
		}
	}
	return k
}
