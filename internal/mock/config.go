package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("15ms") and also accepts a number of nanoseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts "15ms" or 15000000.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var ns int64
	if err := json.Unmarshal(b, &ns); err != nil {
		return fmt.Errorf("duration %s: expected a string like \"15ms\" or integer nanoseconds", b)
	}
	*d = Duration(ns)
	return nil
}

// Latency is the latency model; see the package doc for the formula.
type Latency struct {
	// PrefillBase is the fixed cost of a prefill step.
	PrefillBase Duration `json:"prefill_base"`
	// PrefillPerToken is the cost of each prompt token not found in the
	// prefix cache. Embeddings, rerank and score requests cost
	// PrefillBase + PrefillPerToken x their input tokens (every item's: an
	// embedding input, a rerank query with each document, a score pair),
	// then answer with one body.
	PrefillPerToken Duration `json:"prefill_per_token"`
	// DecodeBase is the inter-token time with one running sequence.
	DecodeBase Duration `json:"decode_base"`
	// DecodePerSeq is added to the inter-token time for every other running
	// sequence (continuous batching slows every step down).
	DecodePerSeq Duration `json:"decode_per_seq"`
	// JitterCV is the coefficient of variation of the log-normal factor
	// (mean 1) applied to every inter-token time; 0 disables jitter.
	JitterCV float64 `json:"jitter_cv"`
	// TokensPerEvent is how many tokens each SSE event carries (1 = one
	// event per token; k > 1 imitates speculative decoding or chunked output).
	TokensPerEvent int `json:"tokens_per_event"`
	// SpecK > 0 turns on speculative decoding: each decode step proposes
	// SpecK draft tokens, accepts each in turn with probability SpecAccept
	// until the first rejection, and emits the accepted ones plus the
	// bonus token as one event (1 to SpecK+1 tokens, fewer at the end of
	// the reasoning, a tool call or the output), in one decode step's
	// time. The step's counts go to vLLM's vllm:spec_decode_* counters.
	// It replaces tokens_per_event, which must then be 1.
	SpecK      int     `json:"spec_k"`
	SpecAccept float64 `json:"spec_accept"`
	// MaxNumSeqs is the batch capacity: requests beyond it wait (FIFO).
	MaxNumSeqs int `json:"max_num_seqs"`
	// OutputMean and OutputCV give the log-normal output length drawn when a
	// request does not set ignore_eos; the draw is capped by max_tokens.
	OutputMean int     `json:"output_mean"`
	OutputCV   float64 `json:"output_cv"`
	// ReasoningMean and ReasoningCV give the log-normal number of
	// reasoning tokens a generating request's answer starts with (streamed
	// as the API's reasoning: chat "reasoning" deltas, Responses
	// reasoning_text, Messages thinking); they count in its output and
	// its max_tokens. 0 (the default) answers without reasoning. The
	// ReasoningHeader of a request sets its count exactly; a request that
	// turns reasoning off (chat reasoning_effort or Responses
	// reasoning.effort "none", Messages thinking disabled) and completions
	// get none; Messages thinking.budget_tokens caps it.
	ReasoningMean int     `json:"reasoning_mean"`
	ReasoningCV   float64 `json:"reasoning_cv"`
	// MaxModelLen bounds prompt + output; max_tokens defaults to what is left.
	MaxModelLen int `json:"max_model_len"`
	// PrefixCacheTokens is the prefix cache capacity in tokens (LRU); 0
	// disables the cache.
	PrefixCacheTokens int `json:"prefix_cache_tokens"`
}

// FaultRates are per-request probabilities of each fault kind, drawn
// independently of the X-Tracekit-Fault header (which always wins). Their
// sum must not exceed 1.
type FaultRates struct {
	Status429   float64 `json:"status_429"`
	Status500   float64 `json:"status_500"`
	Status503   float64 `json:"status_503"`
	Reset       float64 `json:"reset"`
	Disconnect  float64 `json:"disconnect"`
	Stall       float64 `json:"stall"`
	Malformed   float64 `json:"malformed"`
	NoDone      float64 `json:"nodone"`
	SlowHeaders float64 `json:"slowheaders"`
	NoHeaders   float64 `json:"noheaders"`
	Gzip        float64 `json:"gzip"`
	JSON        float64 `json:"json"`
	Error       float64 `json:"error"`
	// StallFor and SlowHeadersFor are the durations used by drawn stall and
	// slowheaders faults.
	StallFor       Duration `json:"stall_for"`
	SlowHeadersFor Duration `json:"slowheaders_for"`
}

// probabilities lists every per-request probability.
func (f FaultRates) probabilities() []float64 {
	return []float64{f.Status429, f.Status500, f.Status503, f.Reset, f.Disconnect, f.Stall, f.Malformed, f.NoDone, f.SlowHeaders, f.NoHeaders, f.Gzip, f.JSON, f.Error}
}

func (f FaultRates) sum() float64 {
	s := 0.0
	for _, p := range f.probabilities() {
		s += p
	}
	return s
}

// Config configures a mock server. Start with DefaultConfig.
type Config struct {
	// Listen is the address to listen on; empty means 127.0.0.1:0 (a random
	// loopback port).
	Listen string `json:"listen"`
	// Model is the served model name listed by /v1/models, and the one a
	// request that names none gets. Models are more served names, each with
	// its own latency (models.go). Requests naming a model not served are
	// answered anyway with the base latency (the response echoes their
	// name) unless StrictModel is set, when they get vLLM's 404.
	Model       string        `json:"model"`
	Models      []ModelConfig `json:"models,omitempty"`
	StrictModel bool          `json:"strict_model"`
	// Seed makes output lengths, jitter, drawn faults and the generated
	// text deterministic.
	Seed    int64      `json:"seed"`
	Latency Latency    `json:"latency"`
	Faults  FaultRates `json:"faults"`
	// IdleClose, when above 0, closes a keep-alive connection that has
	// been idle that long after a response (no request in flight, no byte
	// received), silently, as uvicorn's timeout_keep_alive does: a FIN with
	// no Connection: close on the response before. 0 never closes one
	// (connections idle for 2 minutes are still reaped).
	IdleClose Duration `json:"idle_close"`
	// CloseAfterResponse closes every connection right after its response
	// completes, without sending Connection: close.
	CloseAfterResponse bool `json:"close_after_response"`
	// LogPath, when set, is where the Parquet ground-truth log is written.
	LogPath string `json:"log_path"`
	// KeepLog keeps every log entry in memory for Server.Log (tests,
	// calibrate); KeepBodies also keeps each request body in its entry.
	KeepLog    bool `json:"keep_log"`
	KeepBodies bool `json:"keep_bodies"`
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// MediaFetchTimeout bounds the fetch of a media item given by http(s)
	// URL, MaxMediaBytes its size: beyond either the request gets a 400.
	// vLLM's VLLM_IMAGE_FETCH_TIMEOUT defaults to 5 s.
	MediaFetchTimeout Duration `json:"media_fetch_timeout"`
	MaxMediaBytes     int64    `json:"max_media_bytes"`
	// MediaCheck is how far an image is checked: MediaCheckFull (the
	// default) decodes its pixels, as vLLM does before its encoder sees
	// it, so a damaged image gets a 400; MediaCheckHeader reads its
	// header alone (format and size, all the media tokens need), for a
	// mock that must not spend a CPU on decoding, such as one sharing a
	// small machine with the client it measures.
	MediaCheck string `json:"media_check"`
	// StrictAnthropic makes /v1/messages require the anthropic-version
	// header (400 without) and an API key, x-api-key or Authorization
	// (401 without), in Anthropic's error shape, as Anthropic's API does.
	// Off by default, as in vLLM, which checks neither.
	StrictAnthropic bool `json:"strict_anthropic"`
	// ResponseStoreBytes bounds the store of recent Responses answers'
	// transcripts that previous_response_id continues (least recently
	// used first out); 0 stores none.
	ResponseStoreBytes int64 `json:"response_store_bytes"`
	// EmbeddingDimensions is the size of the embeddings the mock returns
	// (a request's "dimensions" may ask for fewer).
	EmbeddingDimensions int `json:"embedding_dimensions"`
	// TranscriptionStream is the shape of /v1/audio/transcriptions and
	// translations streams and bodies: "vllm" (chat-shaped chunks, data:
	// [DONE]; bodies report the audio's seconds) or "openai"
	// (transcript.text.delta and transcript.text.done events; bodies
	// report tokens). Empty is "vllm".
	TranscriptionStream string `json:"transcription_stream"`
	// Tokens counts prompt tokens; nil means ApproxTokens. Not in JSON.
	Tokens TokenCounter `json:"-"`
}

// DefaultConfig returns a model of a small GPU serving a 7-8B model: about
// 35 ms to the first token of a short prompt and 15 ms per output token.
func DefaultConfig() Config {
	return Config{
		Model: "tracekit-mock",
		Seed:  1,
		Latency: Latency{
			PrefillBase:       Duration(20 * time.Millisecond),
			PrefillPerToken:   Duration(50 * time.Microsecond),
			DecodeBase:        Duration(15 * time.Millisecond),
			DecodePerSeq:      Duration(50 * time.Microsecond),
			JitterCV:          0.1,
			TokensPerEvent:    1,
			MaxNumSeqs:        256,
			OutputMean:        128,
			OutputCV:          0.5,
			ReasoningCV:       0.5,
			MaxModelLen:       32768,
			PrefixCacheTokens: 1 << 20,
		},
		Faults: FaultRates{
			StallFor:       Duration(2 * time.Second),
			SlowHeadersFor: Duration(2 * time.Second),
		},
		MaxBodyBytes:        32 << 20,
		MediaFetchTimeout:   Duration(5 * time.Second),
		MaxMediaBytes:       32 << 20,
		ResponseStoreBytes:  64 << 20,
		EmbeddingDimensions: 384,
	}
}

// LoadConfig reads a JSON config file over base: keys present in the file
// replace base's values, absent keys keep them. Unknown keys are an error.
func LoadConfig(path string, base Config) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("reading mock config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	cfg := base
	if err := dec.Decode(&cfg); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return base, fmt.Errorf("%s: byte %d: invalid JSON: %w", path, se.Offset, err)
		}
		return base, fmt.Errorf("%s: expected a mock config object: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	if err := c.validateLatency(); err != nil {
		return err
	}
	if err := c.validateRest(); err != nil {
		return err
	}
	_, err := c.modelLatencies()
	return err
}

// validateLatency reports the first invalid setting of c.Latency.
func (c Config) validateLatency() error {
	l := c.Latency
	switch {
	case l.PrefillBase < 0 || l.PrefillPerToken < 0 || l.DecodeBase < 0 || l.DecodePerSeq < 0:
		return errors.New("latency durations must not be negative")
	case l.JitterCV < 0:
		return fmt.Errorf("jitter_cv %g must be >= 0", l.JitterCV)
	case l.TokensPerEvent < 1:
		return fmt.Errorf("tokens_per_event %d must be >= 1", l.TokensPerEvent)
	case l.SpecK < 0:
		return fmt.Errorf("spec_k %d must be >= 0", l.SpecK)
	case l.SpecK > maxSpecK:
		return fmt.Errorf("spec_k %d must be <= %d", l.SpecK, maxSpecK)
	case !(l.SpecAccept >= 0 && l.SpecAccept <= 1):
		return fmt.Errorf("spec_accept %g must be between 0 and 1", l.SpecAccept)
	case l.SpecK > 0 && l.TokensPerEvent > 1:
		return fmt.Errorf("spec_k %d and tokens_per_event %d: speculative decoding sets the tokens per event; leave tokens_per_event at 1", l.SpecK, l.TokensPerEvent)
	case l.MaxNumSeqs < 1:
		return fmt.Errorf("max_num_seqs %d must be >= 1", l.MaxNumSeqs)
	case l.OutputMean < 1:
		return fmt.Errorf("output_mean %d must be >= 1", l.OutputMean)
	case l.OutputCV < 0:
		return fmt.Errorf("output_cv %g must be >= 0", l.OutputCV)
	case l.ReasoningMean < 0:
		return fmt.Errorf("reasoning_mean %d must be >= 0", l.ReasoningMean)
	case l.ReasoningCV < 0:
		return fmt.Errorf("reasoning_cv %g must be >= 0", l.ReasoningCV)
	case l.MaxModelLen < 2:
		return fmt.Errorf("max_model_len %d must be >= 2", l.MaxModelLen)
	case l.PrefixCacheTokens < 0:
		return fmt.Errorf("prefix_cache_tokens %d must be >= 0", l.PrefixCacheTokens)
	}
	return nil
}

// validateRest reports the first invalid setting outside the latency.
func (c Config) validateRest() error {
	switch {
	case c.MaxBodyBytes < 1:
		return fmt.Errorf("max_body_bytes %d must be >= 1", c.MaxBodyBytes)
	case c.MediaCheck != "" && c.MediaCheck != MediaCheckFull && c.MediaCheck != MediaCheckHeader:
		return fmt.Errorf("media_check %q: expected %s or %s", c.MediaCheck, MediaCheckFull, MediaCheckHeader)
	case c.MediaFetchTimeout <= 0:
		return fmt.Errorf("media_fetch_timeout %v must be above 0", c.MediaFetchTimeout.D())
	case c.MaxMediaBytes < 1:
		return fmt.Errorf("max_media_bytes %d must be >= 1", c.MaxMediaBytes)
	case c.Model == "":
		return errors.New("model must not be empty")
	case c.ResponseStoreBytes < 0:
		return fmt.Errorf("response_store_bytes %d must be >= 0", c.ResponseStoreBytes)
	case c.EmbeddingDimensions < 1:
		return fmt.Errorf("embedding_dimensions %d must be >= 1", c.EmbeddingDimensions)
	case c.TranscriptionStream != "" && !validShape(c.TranscriptionStream):
		return fmt.Errorf("transcription_stream %q: want vllm or openai", c.TranscriptionStream)
	}
	f := c.Faults
	for _, p := range f.probabilities() {
		if p < 0 || p > 1 {
			return fmt.Errorf("fault probability %g must be in [0, 1]", p)
		}
	}
	if s := f.sum(); s > 1 {
		return fmt.Errorf("fault probabilities sum to %g, must be <= 1", s)
	}
	if f.StallFor < 0 || f.SlowHeadersFor < 0 {
		return errors.New("fault durations must not be negative")
	}
	if c.IdleClose < 0 {
		return fmt.Errorf("idle_close %v must not be negative", c.IdleClose.D())
	}
	return nil
}
