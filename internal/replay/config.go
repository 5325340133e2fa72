package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/internal/redact"
)

// Timing is how a conversation's turns are scheduled.
type Timing string

// Timing modes.
const (
	TimingClosed Timing = "closed" // turn k+1 leaves its think time after turn k ended
	TimingTrace  Timing = "trace"  // every turn leaves at its own arrival offset
)

// History is what a turn's history holds as the earlier answers.
type History string

// History modes.
const (
	HistoryActual    History = "actual"    // the server's answers
	HistoryReference History = "reference" // the trace's reference answers
)

// Policy is how requests are spread over several targets.
type Policy string

// Target policies.
const (
	PolicyRoundRobin   Policy = "round-robin"  // each request to the next target
	PolicyConversation Policy = "conversation" // a conversation sticks to one target
)

// configType names Config in the *fielderr.Error of a bad field: the
// command line names the flag that set it instead.
const configType = "replay.Config"

// fieldErr is a *fielderr.Error about the Config field field.
func fieldErr(field, format string, args ...any) error {
	return fielderr.Errorf(configType, field, format, args...)
}

// parseEnum returns s as one of allowed, or a *fielderr.Error naming field.
func parseEnum[T ~string](field, s string, allowed ...T) (T, error) {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if s == string(a) {
			return a, nil
		}
		names[i] = string(a)
	}
	return "", fieldErr(field, "%s %q: expected one of %s", fielderr.Name(field), s, strings.Join(names, ", "))
}

// ParseTiming parses a Timing ("closed" or "trace").
func ParseTiming(s string) (Timing, error) {
	return parseEnum("Timing", s, TimingClosed, TimingTrace)
}

// ParseHistory parses a History ("actual" or "reference").
func ParseHistory(s string) (History, error) {
	return parseEnum("History", s, HistoryActual, HistoryReference)
}

// ParsePolicy parses a Policy ("round-robin" or "conversation").
func ParsePolicy(s string) (Policy, error) {
	return parseEnum("Policy", s, PolicyRoundRobin, PolicyConversation)
}

// ParseEndpoint parses an Endpoint: one of trace.Endpoints.
func ParseEndpoint(s string) (Endpoint, error) {
	return parseEnum("Endpoint", s, EndpointChat, EndpointCompletions, EndpointResponses, EndpointMessages,
		EndpointEmbeddings, EndpointRerank, EndpointScore, EndpointTranscriptions, EndpointTranslations)
}

// ParseResponsesState parses a ResponsesState ("client" or "server").
func ParseResponsesState(s string) (ResponsesState, error) {
	return parseEnum("ResponsesState", s, ResponsesClient, ResponsesServer)
}

// ParseReasoningEffort parses a reasoning effort ("low", "medium" or "high").
func ParseReasoningEffort(s string) (string, error) {
	return parseEnum("ReasoningEffort", s, "low", "medium", "high")
}

// DefaultIdleConnTimeout is Config.IdleConnTimeout's default. Servers
// close idle keep-alive connections without a word: uvicorn (vLLM's and
// SGLang's HTTP server) after 5 s (timeout_keep_alive), many proxies and
// load balancers likewise. A request written on such a connection fails
// before its first response byte although the server is healthy. Staying
// well below 5 s leaves room for the request's trip and for the server's
// timer firing early; a connection not reused costs one dial.
const DefaultIdleConnTimeout = 3 * time.Second

// Config is everything a run needs. The zero value of every limit means
// "no limit"; New applies the documented defaults.
type Config struct {
	Trace   string   // trace file to replay when New is given no Source
	Targets []string // base URLs, e.g. http://127.0.0.1:8000
	Policy  Policy   // PolicyRoundRobin (default) or PolicyConversation

	// Endpoint is the API of the turns whose trace names none (chat by
	// default); with EndpointOverride, of every turn, whatever its trace
	// says.
	Endpoint         Endpoint
	EndpointOverride bool
	// ResponsesState is how a Responses conversation carries its history:
	// ResponsesClient (default) sends it whole as input items every turn;
	// ResponsesServer sends only the new items with previous_response_id
	// (closed loop; open loop and agent graphs send it whole).
	ResponsesState ResponsesState
	// ReasoningEffort (low, medium, high; "" unset) is sent as Responses'
	// reasoning.effort and chat's reasoning_effort.
	ReasoningEffort string
	// ThinkingBudget, when positive, asks Messages for extended thinking
	// with that budget of tokens.
	ThinkingBudget int
	// MediaURLBase, when set, is an http URL of this host (port 0: any)
	// replay serves the trace's media under while it runs: requests
	// carry each item's URL there instead of a data URI.
	MediaURLBase string
	// MediaFile is the media file holding the bytes of the trace's real
	// media items (trace.Media.Hash set); empty: the one beside the trace
	// file (trace.MediaPath). A trace without real items needs none.
	MediaFile string

	Model       string            // empty: the first model of the target's /v1/models
	APIKey      string            // sent as a Bearer token; never recorded
	Headers     map[string]string // extra request headers
	IgnoreEOS   bool
	Temperature *float64
	ExtraBody   string // a JSON object merged into every request body
	// ContinuousUsage asks for vLLM's continuous_usage_stats: "auto"
	// (default: probe the server once before the run), "on" or "off".
	ContinuousUsage string

	// MockHints sends, with every request whose turn has a reference
	// answer, the mock's tool-call headers (mock.ToolCallsHeader,
	// mock.ToolNamesHeader) holding the count and names of the trace's
	// ReferenceToolCalls, so `tracekit mock` answers the calls the trace
	// recorded; and with every turn that has ReasoningTokens, the mock's
	// mock.ReasoningHeader, so its answer starts with exactly that many
	// reasoning tokens. Off by default: a real server ignores the headers, but it
	// must not receive what only a mock reads.
	MockHints bool

	// SessionHeader, when not "", names a header every request carries
	// its session key in (see sessionKey): a KV-cache-aware router keeps a
	// conversation on the engine that holds its cache by it.
	// SessionField "user" puts the key in the body instead (or too): the
	// "user" field, Messages' metadata.user_id. SessionPerAgent keys each
	// agent context of a graph conversation apart (a sub-agent with a
	// context of its own gets its own key) rather than the whole session.
	SessionHeader   string
	SessionField    string
	SessionPerAgent bool

	// CancelRate is the fraction of requests replay cancels on purpose,
	// closing the connection CancelAfter seconds (a draw per request)
	// after it starts sending, as a user who gives up does (AIPerf's
	// request cancellation). The choice and the delay are drawn from
	// Seed and the request id, so a rerun cancels the same requests at
	// the same delays. A request that ends first is not canceled. Such a
	// request records kind trace.ErrCanceledByClient.
	CancelRate  float64
	CancelAfter Sampler

	// ConcurrencyRampDuration, when > 0, raises the request slots from 1
	// to MaxConcurrency linearly over that time from the run's start (as
	// AIPerf's --concurrency-ramp-duration): slot k opens at
	// (k-1)/(MaxConcurrency-1) of it.
	ConcurrencyRampDuration time.Duration

	Timing  Timing  // TimingClosed (default) or TimingTrace
	History History // HistoryActual (default) or HistoryReference
	Speed   float64 // time scale: 2 replays twice as fast; default 1
	Seed    uint64  // seeds synthesized text for redacted messages
	Shard   int     // this process replays conversations with hash % Shards == Shard
	Shards  int     // default 1

	MaxConcurrency         int // requests in flight
	MaxActiveConversations int // conversations started and not finished
	MaxRequests            int // measured requests (warm-up excluded)
	Warmup                 int // the first Warmup requests are marked warm-up

	Duration         time.Duration // stop sending new requests after this
	RequestTimeout   time.Duration // per request, headers to last byte
	IdleTimeout      time.Duration // longest silence between two reads of a stream
	BenchmarkTimeout time.Duration // whole run; in-flight requests are then canceled
	ReadyTimeout     time.Duration // wait for /health or /v1/models before the clock starts
	DialTimeout      time.Duration // default 10 s
	// IdleConnTimeout is the longest a keep-alive connection may sit idle
	// in the pool and still be given to a request; default
	// DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// Insecure accepts any TLS certificate from an https:// target (a
	// self-signed test deployment); the default verifies it.
	Insecure bool
	// StampMode is how event arrivals are stamped (package stamp): StampGoroutine,
	// StampKernel or StampKernelOffset; "" is DefaultStampMode where the
	// kernel supports it. The mode used is in RunMeta.Stamps.
	StampMode string

	ResetPrefixCache bool // POST /reset_prefix_cache to every target first
	// NoProbe skips the pre-run probe request (which fails a run whose
	// target is unreachable or refuses the model before the clock starts,
	// and verifies continuous usage); "auto" continuous usage is then off.
	NoProbe bool

	// GCPercent is the garbage collector's target (as GOGC) while Run runs;
	// the previous setting is restored after. 0 means DefaultGCPercent, a
	// negative value leaves the process's setting alone, and so does a
	// GOGC environment variable.
	GCPercent int

	// Dispatcher wakes the schedule; default a clock.Precise with DefaultSpin.
	Dispatcher Dispatcher
	// Logf receives warnings (a failed prefix-cache reset, ...); may be nil.
	Logf func(format string, args ...any)
	// Command is the command line, already free of secrets, for RunMeta.
	Command string

	// Distributed runs (start.go): the wall-clock instant every shard's
	// clock starts at (zero: once ready), the run id the shards share
	// (empty: derived), and where Trace came from when it is a local copy
	// (a redacted URL, recorded instead of Trace).
	StartAt     time.Time
	RunID       string
	TraceSource string
}

// withDefaults returns c with defaults applied, or an error naming the first
// invalid field; haveSource: the run has a Source, Trace may be empty.
func (c Config) withDefaults(haveSource bool) (Config, error) {
	if c.Trace == "" && !haveSource {
		return c, fmt.Errorf("no trace file given")
	}
	if len(c.Targets) == 0 {
		return c, fieldErr("Targets", "no %s given", fielderr.Name("Targets"))
	}
	for i, t := range c.Targets {
		if err := CheckTarget(t); err != nil {
			return c, fieldErr("Targets", "%s %w", fielderr.Name("Targets"), err)
		}
		c.Targets[i] = strings.TrimSuffix(strings.TrimSuffix(t, "/"), "/v1")
	}
	if !c.StartAt.IsZero() && time.Until(c.StartAt) > MaxStartAhead {
		return c, fmt.Errorf("StartAt %s: more than %v ahead", c.StartAt.UTC().Format(time.RFC3339Nano), MaxStartAhead)
	}
	var err error
	if c.Policy, err = enumOrDefault(c.Policy, PolicyRoundRobin, ParsePolicy); err != nil {
		return c, err
	}
	if c.Endpoint, err = enumOrDefault(c.Endpoint, EndpointChat, ParseEndpoint); err != nil {
		return c, err
	}
	if c.ResponsesState, err = enumOrDefault(c.ResponsesState, ResponsesClient, ParseResponsesState); err != nil {
		return c, err
	}
	if c.ReasoningEffort != "" {
		if _, err = ParseReasoningEffort(c.ReasoningEffort); err != nil {
			return c, err
		}
	}
	if c.ThinkingBudget < 0 {
		return c, fieldErr("ThinkingBudget", "%s %d: expected 0 (no thinking) or a positive number of tokens", fielderr.Name("ThinkingBudget"), c.ThinkingBudget)
	}
	if c.Timing, err = enumOrDefault(c.Timing, TimingClosed, ParseTiming); err != nil {
		return c, err
	}
	if c.History, err = enumOrDefault(c.History, HistoryActual, ParseHistory); err != nil {
		return c, err
	}
	switch c.ContinuousUsage {
	case "":
		c.ContinuousUsage = "auto"
	case "auto", "on", "off":
	default:
		return c, fieldErr("ContinuousUsage", "%s %q: expected one of auto, on, off", fielderr.Name("ContinuousUsage"), c.ContinuousUsage)
	}
	if c.Speed == 0 {
		c.Speed = 1
	}
	if c.Speed < 0 || math.IsNaN(c.Speed) || math.IsInf(c.Speed, 0) {
		return c, fieldErr("Speed", "%s %g: expected a positive factor", fielderr.Name("Speed"), c.Speed)
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Shard < 0 || c.Shard >= c.Shards {
		return c, fieldErr("Shard", "%s %d/%d: expected 0 <= index < count", fielderr.Name("Shard"), c.Shard, c.Shards)
	}
	for name, v := range map[string]int{"MaxConcurrency": c.MaxConcurrency, "MaxActiveConversations": c.MaxActiveConversations, "MaxRequests": c.MaxRequests, "Warmup": c.Warmup} {
		if v < 0 {
			return c, fieldErr(name, "%s %d: expected 0 (no limit) or more", fielderr.Name(name), v)
		}
	}
	for name, d := range map[string]time.Duration{"Duration": c.Duration, "RequestTimeout": c.RequestTimeout,
		"IdleTimeout": c.IdleTimeout, "BenchmarkTimeout": c.BenchmarkTimeout, "ReadyTimeout": c.ReadyTimeout,
		"DialTimeout": c.DialTimeout, "IdleConnTimeout": c.IdleConnTimeout} {
		if d < 0 {
			return c, fieldErr(name, "%s %v: expected 0 (the default) or a positive duration", fielderr.Name(name), d)
		}
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.IdleConnTimeout == 0 {
		c.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if _, err := ParseStampMode(c.StampMode); err != nil {
		return c, err
	}
	if c.ExtraBody != "" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.ExtraBody), &m); err != nil {
			return c, fieldErr("ExtraBody", "%s: expected a JSON object: %w", fielderr.Name("ExtraBody"), err)
		}
		for _, k := range []string{"user", "metadata"} {
			if _, ok := m[k]; ok && c.SessionField != "" {
				return c, fieldErr("ExtraBody", "%s sets %q, which %s sets per session", fielderr.Name("ExtraBody"), k, fielderr.Name("SessionField"))
			}
		}
	}
	if err := c.checkSession(); err != nil {
		return c, err
	}
	if c.ConcurrencyRampDuration < 0 || (c.ConcurrencyRampDuration > 0 && c.MaxConcurrency < 2) {
		return c, fieldErr("ConcurrencyRampDuration", "%v: a ramp needs a duration above 0 and a MaxConcurrency of at least 2", c.ConcurrencyRampDuration)
	}
	if c.CancelRate < 0 || c.CancelRate > 1 {
		return c, fieldErr("CancelRate", "%g: want a fraction from 0 to 1", c.CancelRate)
	}
	if c.CancelRate > 0 && c.CancelAfter == nil {
		return c, fieldErr("CancelAfter", "no delay for the canceled requests")
	}
	if c.RunID != "" {
		if err := CheckRunID(c.RunID); err != nil {
			return c, fieldErr("RunID", "%w", err)
		}
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return c, fieldErr("Headers", "%s %q: expected a header name without spaces or colons", fielderr.Name("Headers"), k)
		}
	}
	return c, nil
}

// CheckTarget checks a target's base URL: http:// or https://, a host,
// and a port, when given, from 1 to 65535 (a bad one would only show as a
// failed dial, a failed run instead of bad input).
func CheckTarget(target string) error {
	const want = "expected an http:// or https:// base URL such as http://127.0.0.1:8000"
	u, err := url.Parse(target)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without url.Parse's repeat of the URL
		}
		return fmt.Errorf("%q: %v: %s", target, err, want)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: %s", target, want)
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q: expected a port from 1 to 65535", target, p)
		}
	}
	return nil
}

// enumOrDefault checks v with parse; the zero value means def.
func enumOrDefault[T ~string](v, def T, parse func(string) (T, error)) (T, error) {
	if v == "" {
		return def, nil
	}
	return parse(string(v))
}

// extraInner returns the inside of the --extra-body object, for appending
// to a request body.
func (c Config) extraInner() []byte {
	b := bytes.TrimSpace([]byte(c.ExtraBody))
	if len(b) < 2 {
		return nil
	}
	return bytes.TrimSpace(b[1 : len(b)-1])
}

// AddSecrets gives s every credential the run sends or was given: the
// API key, the values of credential-like headers, and the credentials in
// the targets' and the trace's URLs. Messages (a server echoing a key)
// are scrubbed of them before they are recorded or printed.
func (c Config) AddSecrets(s *redact.Scrubber) {
	s.Add(c.APIKey)
	for k, v := range c.Headers {
		s.AddHeader(k, v)
	}
	for _, t := range c.Targets {
		s.AddURL(t)
	}
	for _, u := range []string{c.Trace, c.TraceSource} {
		if IsURL(u) {
			s.AddURL(u)
		}
	}
}

// meta returns the configuration as recorded in RunMeta.Config: everything
// but the API key, with credential-like header values redacted.
func (c Config) meta() map[string]any {
	headers := make(map[string]string, len(c.Headers))
	for k, v := range c.Headers {
		if redact.Header(k) {
			v = "<redacted>"
		}
		headers[k] = v
	}
	m := map[string]any{
		"trace": c.Trace, "targets": shownTargets(c.Targets), "target_policy": c.Policy,
		"endpoint": c.Endpoint, "model": c.Model, "headers": headers,
		"api_key_set": c.APIKey != "", "ignore_eos": c.IgnoreEOS,
		"extra_body": c.ExtraBody, "continuous_usage": c.ContinuousUsage,
		"timing": c.Timing, "history": c.History, "speed": c.Speed, "seed": c.Seed,
		"shard": c.Shard, "shards": c.Shards,
		"max_concurrency": c.MaxConcurrency, "max_active_conversations": c.MaxActiveConversations,
		"max_requests": c.MaxRequests, "warmup": c.Warmup,
		"duration": c.Duration.String(), "request_timeout": c.RequestTimeout.String(),
		"idle_timeout": c.IdleTimeout.String(), "benchmark_timeout": c.BenchmarkTimeout.String(),
		"ready_timeout": c.ReadyTimeout.String(), "dial_timeout": c.DialTimeout.String(),
		"idle_conn_timeout":  c.IdleConnTimeout.String(),
		"reset_prefix_cache": c.ResetPrefixCache, "no_probe": c.NoProbe, "insecure": c.Insecure,
		"stamp_mode":     c.StampMode,
		"session_header": c.SessionHeader, "session_field": c.SessionField, "session_per_agent": c.SessionPerAgent,
	}
	if c.ConcurrencyRampDuration > 0 {
		m["concurrency_ramp_duration"] = c.ConcurrencyRampDuration.String()
	}
	if c.CancelRate > 0 {
		m["cancel_rate"] = c.CancelRate
		if s, ok := c.CancelAfter.(fmt.Stringer); ok {
			m["cancel_after"] = s.String()
		}
	}
	if c.Temperature != nil {
		m["temperature"] = *c.Temperature
	}
	if c.TraceSource != "" {
		m["trace"] = c.TraceSource
	}
	// Only when set: a run of chat as before records the same metadata.
	if c.EndpointOverride {
		m["endpoint_override"] = true
	}
	if c.ResponsesState == ResponsesServer {
		m["responses_state"] = c.ResponsesState
	}
	if c.ReasoningEffort != "" {
		m["reasoning_effort"] = c.ReasoningEffort
	}
	if c.ThinkingBudget > 0 {
		m["thinking_budget"] = c.ThinkingBudget
	}
	if c.MediaURLBase != "" {
		m["media_url_base"] = c.MediaURLBase
	}
	return m
}

// RedactCommand joins a command line for the recording's metadata with the
// values of credential-like --header flags and URL credentials replaced.
func RedactCommand(args []string) string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		out[i] = redactURLArg(out[i]) // source_url.go: userinfo and query values
		prefix := "--header="
		if out[i] == "--header" && i+1 < len(out) {
			i, prefix = i+1, ""
		} else if !strings.HasPrefix(out[i], prefix) {
			continue
		}
		if k, _, ok := strings.Cut(strings.TrimPrefix(out[i], prefix), ":"); ok && redact.Header(k) {
			out[i] = prefix + k + ":<redacted>"
		}
	}
	return strings.Join(out, " ")
}

// fdMargin is the file descriptors a run needs besides its sockets: the
// trace, the recording, its journal, stdio, the poller, the dispatcher's
// timerfd and the like, with room to spare.
const fdMargin = 64

// checkFileLimit raises the soft file-descriptor limit to the hard one and
// fails when maxConcurrency streams (one socket each) and fdMargin still
// do not fit: otherwise the excess requests would fail one by one with
// "too many open files". Without a concurrency limit the need is unknown
// and nothing is checked.
func checkFileLimit(maxConcurrency int) error {
	soft, hard, ok := raiseFileLimit()
	if !ok || maxConcurrency <= 0 {
		return nil
	}
	if need := uint64(maxConcurrency) + fdMargin; need > soft {
		return fieldErr("MaxConcurrency", "%s %d needs about %d file descriptors (a socket per stream and %d more), the limit is %d (hard limit %d): raise it with ulimit -n or lower %s",
			fielderr.Name("MaxConcurrency"), maxConcurrency, need, fdMargin, soft, hard, fielderr.Name("MaxConcurrency"))
	}
	return nil
}
