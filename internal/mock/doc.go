// Package mock is an OpenAI-compatible LLM server with a latency model,
// injectable faults and a ground-truth log: the default target of tracekit's
// demo and tests, and the reference its fidelity benchmarks compare
// recordings against. Use it like net/http/httptest:
//
//	srv, err := mock.Start(mock.DefaultConfig()) // random 127.0.0.1 port
//	defer srv.Close()
//	resp, err := http.Post(srv.URL()+"/v1/chat/completions", ...)
//
// # Endpoints (as vLLM serves them)
//
// POST /v1/chat/completions and /v1/completions, streaming or not, with
// max_tokens / max_completion_tokens, ignore_eos, stream_options.include_usage
// (a final usage chunk with "choices": []) and
// stream_options.continuous_usage_stats (cumulative usage in every chunk).
// GET /v1/models, GET /health, POST /reset_prefix_cache, GET /metrics
// (Prometheus text: vllm:num_requests_running/waiting, prompt and generation
// token counters, prefix cache queries/hits, the latency histograms below,
// and the mock's own event lateness quantiles). A chat stream is: a role-only chunk
// {"role":"assistant","content":""}, content chunks, the last of which
// carries finish_reason, the usage chunk when asked, then data: [DONE].
// Bad bodies get vLLM's error JSON
// {"error":{"message":...,"type":"BadRequestError","param":...,"code":400}}.
//
// # Tool calls
//
// A chat request whose tool_choice is "required" or names a function
// ({"type":"function","function":{"name":...}}) is answered with one tool
// call (of the named function, else the first of its tools); the request
// header X-Tracekit-Tool-Calls: N (0..64) asks for N calls whatever
// tool_choice says (names taken from tools in turn, "tool" without tools;
// 0 is a text answer), and X-Tracekit-Tool-Names: a,b,... for calls of
// those functions in that order (N is their count; with both headers the
// counts must agree). Only the mock reads these headers: replay sends them
// with --mock-hints, the count and names its trace recorded, so a
// replayed agent trace follows its recorded tool calls (the arguments are
// still the mock's words).
// tool_choice without tools is a 400, as in vLLM. The planned output length
// is unchanged and split evenly over the calls: every token is one word of
// an argument {"text": "w1 w2 ..."} (no end-of-text token), and
// finish_reason is "tool_calls". Streamed as vLLM does: the event of a
// call's first token carries its fragment {"id","type":"function","index",
// "function":{"name","arguments"}}, later events {"index","function":
// {"arguments"}} pieces (one fragment per call an event's tokens touch);
// the timing of every event is the latency model's, as for text. A
// non-streaming answer has content null and message.tool_calls. The log's
// tool_calls column counts the calls sent.
//
// Every response carries X-Request-Id: the request's own X-Request-Id
// header when it has one (replay sends its ids there), else a generated id.
// The log is keyed by it.
//
// # Request flow
//
// A handler reads and validates the body, counts the prompt (Config.Tokens,
// by default ApproxTokens: ceil(len/4) tokens per whitespace-separated word,
// no chat-template overhead) and hashes its messages, seeds a per-request
// generator from (Config.Seed, request id, messages hash), draws the output
// length, picks a fault, flushes the response headers and waits for a batch
// slot. The stream's events are then written by the scheduler (below);
// finished entries go through a bounded channel to the single goroutine
// that owns the Parquet log.
//
// # Scheduler
//
// One heap holds every running stream keyed by the absolute due time of its
// next event (due times add up the model's ITLs from the first token's, so
// they never drift). GOMAXPROCS workers take the earliest stream when it is
// due, encode its event into the stream's buffer, and write it as one
// HTTP/1.1 chunk straight to the socket with one non-blocking write(2);
// the ground-truth stamp is taken when that write returns, and lateness is
// that stamp minus the due time, for every event. The handler goroutine
// parks meanwhile, so an event costs one syscall and no goroutine wake-up
// or timer; a worker sleeps until the earliest due time but at least 50 us
// (events due closer together share a wake-up), on a clock.Precise (a
// timerfd in Go's poller) for the last 2 ms because Go timers fire with
// millisecond resolution on an idle process (clock_nanosleep would hold a
// P in the syscall and starve an in-process client). The heap is shared so a worker preempted by the OS holds up one
// stream, not its share. A client that does not keep up (the write comes
// up short) gets its stream back on its handler goroutine, which finishes
// the write blocking and sleeps on its own timer from then on
// (tracekit_mock_slow_streams_total counts them); so do HTTP/1.0 requests.
//
// Measured on the shared 2-core dev machine with the client in a child
// process (go test -run '^$' -bench 'Streams1000' -benchtime 1x ./internal/mock/;
// the Goroutines variants run the previous design, a goroutine and timer
// per stream), 100,000 events/s. Server CPU is 6.5 us per event at 1,000
// streams (same as before) and 9.3-9.9 us at 10,000 (was 10.2-11.0); most
// of it is the kernel's loopback TCP path inside write(2), so the gain is in
// timing, not CPU. 1,000 streams: lateness p50 0.065 ms (was 0.49 ms), p99
// 3.0 ms (4.9), median of per-250 ms-slice p99s 0.9 ms (1.9). 10,000 streams
// on a quiet machine: p50 0.1-0.2 ms, per-slice p99 1-3 ms in steady state
// (the old design: p50 1-5 ms, p99 100-500 ms); server and client then take
// about 1.6 of the 2 cores, so whenever another process compiles the
// scheduler falls behind and the whole-run p99 reaches 300-900 ms, as the
// old design's does (400-1100 ms in the same runs).
//
// # Latency model
//
//	TTFT        = queue + PrefillBase + PrefillPerToken * (prompt_tokens - cached_tokens)
//	ITL_j       = (DecodeBase + DecodePerSeq * (running_j - 1)) * J_j
//	J_j         ~ LogNormal with mean 1 and coefficient of variation JitterCV
//	              (exp(s*Z - s^2/2), s^2 = ln(1 + JitterCV^2))
//	output      = max_tokens if ignore_eos, else
//	              min(max_tokens, round(OutputMean * LogNormal(mean 1, OutputCV)))
//	              ending in end-of-text ("stop") unless cut at max_tokens ("length")
//
// queue is the wait for one of MaxNumSeqs batch slots (FIFO); running_j is
// the number of running sequences when token j is decoded. The first token
// comes alone at TTFT (chat sends its role chunk at the same moment); every
// following event carries TokensPerEvent tokens and is due the sum of their
// ITLs after the previous one. max_tokens defaults to MaxModelLen minus the
// prompt; prompt + max_tokens above MaxModelLen is a 400, as in vLLM.
//
// The end-of-text token of a "stop" finish counts in completion_tokens but
// has no text. The generated text is GeneratedText(seed, messages_hash, n):
// a space and a word of at most four bytes per token, so it counts as one
// ApproxTokens token per word when sent back as history.
//
// # Prefix cache
//
// A chat prompt is a hash chain over its messages (role and content); the
// answer of a finished chat request is cached as one more link, so turn k+1
// of a conversation, whose history holds turn k's answer, hits everything
// turn k computed. Completion prompts are chained in 256-byte blocks (or
// 256 token ids). Lookup stops at the first missing link; capacity is
// PrefixCacheTokens with LRU eviction; at least one prompt token is always
// computed, as in vLLM. usage.prompt_tokens_details.cached_tokens reports
// the hit.
//
// # Faults
//
// The request header X-Tracekit-Fault forces one fault; otherwise each
// request draws at most one from Config.Faults' probabilities.
//
//	status=429|500|503   that status with a JSON error body
//	reset                TCP reset before any response byte
//	disconnect=N         connection closed (no final chunk) after N events
//	stall=DUR[@N]        a pause of DUR before event N (default 1); later events shift
//	malformed[@N]        an invalid JSON event before event N (default 1)
//	nodone               the stream ends without data: [DONE]
//	slowheaders=DUR      response headers delayed by DUR
//	noheaders            the request is read, then nothing is ever sent; the
//	                     connection is held until the client leaves or the
//	                     server closes (outcome fault, or canceled)
//	gzip                 Content-Encoding: gzip whatever Accept-Encoding
//	                     said; a stream is flushed per event (a sync flush
//	                     ends every HTTP chunk) so it stays a stream
//	json                 a stream=true request gets the non-streaming JSON
//	                     completion (Content-Type: application/json)
//	closeafter           the connection is closed right after the response,
//	                     which did not say Connection: close
//	idleclose=DUR        this connection gets Config.IdleClose's behaviour
//	                     with DUR after this response
//
// N counts the events the log lists (chat's role chunk is event 0); N
// equal to the number of events acts before the usage chunk and [DONE],
// a larger N does nothing. On a non-streaming response N counts the events
// the same request would have streamed, and the body comes after all of
// them: a stall at any of them delays the body by DUR, malformed cuts it
// in half, disconnect closes the connection instead of sending it. One
// decision (Fault.outcome) serves both paths. The log's fault column holds the canonical form (Fault.String). Drawn
// probabilities exist for all but closeafter and idleclose, which are
// connection behaviours configured server-wide instead. closeafter,
// idleclose, slowheaders and stall leave a complete response (outcome ok);
// the others are outcome fault. A gzip stream is written by its handler
// goroutine, not the scheduler.
//
// # Connections
//
// Config.IdleClose closes a keep-alive connection that has been idle for
// that long after a response (no request in flight, no byte received), as
// uvicorn's timeout_keep_alive does (vLLM serves with 5 s): the response
// before said nothing, the close is a FIN, and a client that reuses the
// connection afterwards reads EOF before any response byte. The idle time
// starts when net/http has flushed the response and ends at the first byte
// read; a Go timer closes the connection within about a millisecond of
// it unless a byte is waiting in the socket's receive queue (an event loop
// handles such a read before its due timer too). Config.CloseAfterResponse
// closes every connection right after its response, unannounced, as some
// proxies do. Connections idle for 2 minutes are always reaped.
// tracekit_mock_idle_closes_total and
// tracekit_mock_closed_after_response_total count both kinds of close.
//
// # Metrics
//
// vLLM's latency histograms, with its bucket bounds and the model_name
// label, are observed as each request goes, from the stamps its log entry
// records, so counts derived from the log equal them:
//
//	vllm:time_to_first_token_seconds     first event with tokens - arrival
//	                                     (a non-streamed body: the planned TTFT)
//	vllm:inter_token_latency_seconds     each later event with tokens - the one
//	                                     before (streams only; a body has none)
//	vllm:time_per_output_token_seconds   vLLM's older name, the same observations
//	vllm:e2e_request_latency_seconds     done - arrival     } requests that got
//	vllm:request_queue_time_seconds      admission - arrival } a batch slot
//
// vllm:kv_cache_usage_perc is a model: the tokens held by the admitted
// requests (prompt plus output so far) over PrefixCacheTokens, at most 1
// (0 without a cache). vllm:num_preemptions_total is always 0.
//
// # Ground-truth log
//
// One LogEntry per request (Parquet, zstd; Config.LogPath, read with
// ReadLog; in memory with Config.KeepLog): request id, arrival in monotonic
// and wall ns, when headers were flushed, admission, status, outcome, fault,
// token counts, messages count and hash, and per event the CLOCK_MONOTONIC
// ns right after its write and flush returned, its tokens and its lateness
// against the schedule. The file metadata (LogMeta) holds the config, the
// server start in monotonic and wall ns, and final Stats. Rows are flushed
// in row groups of trace.RowGroupRows, so memory stays bounded; Close
// completes the file.
package mock
