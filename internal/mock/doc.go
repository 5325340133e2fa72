// Package mock is an LLM server with a latency model, injectable faults
// and a ground-truth log that speaks every API tracekit measures, in
// shapes the official SDKs accept: the default target of tracekit's demo
// and tests, and the reference its fidelity benchmarks compare recordings
// against. Use it like net/http/httptest:
//
//	srv, err := mock.Start(mock.DefaultConfig()) // random 127.0.0.1 port
//	defer srv.Close()
//	resp, err := http.Post(srv.URL()+"/v1/chat/completions", ...)
//
// # Endpoints (as vLLM serves them)
//
// Every API of internal/api/apis, on each of its paths (with and without
// /v1), its bytes written by that API's encoder (internal/api: the mock
// has no encoder of its own):
//
//	POST /v1/chat/completions, /v1/completions   streaming or not; max_tokens /
//	     max_completion_tokens, ignore_eos, stream_options.include_usage (a final
//	     usage chunk with "choices": []) and stream_options.continuous_usage_stats
//	     (cumulative usage in every chunk)
//	POST /v1/responses    OpenAI Responses: input (a string or items: messages with
//	     roles and content parts, function calls and their outputs), instructions,
//	     max_output_tokens, stream, reasoning.effort, tools, tool_choice,
//	     previous_response_id, store (request_responses.go)
//	POST /v1/messages     Anthropic Messages: system, messages with text, tool_use,
//	     tool_result and thinking blocks, max_tokens (required), stream, thinking,
//	     tools, tool_choice (request_messages.go)
//	POST /v1/embeddings   input (a string, strings, token ids or lists of them),
//	     encoding_format float or base64, dimensions
//	POST /v1/rerank, /rerank, /v2/rerank   query, documents (strings or {"text"}),
//	     top_n, return_documents; results sorted by score
//	POST /v1/score, /score   text_1 and text_2, each a string or a list
//	POST /v1/audio/transcriptions, /v1/audio/translations   multipart/form-data:
//	     file (the audio, charged as a media item), model, prompt, stream,
//	     stream_include_usage, max_completion_tokens; answered in
//	     Config.TranscriptionStream's shape (request_speech.go)
//
// Media in a generating request (chat image_url, video_url, input_audio;
// Responses input_image; Messages image blocks) are fetched or decoded,
// probed and charged as prompt tokens by internal/media's formula, or
// answered with a 400 when a server could not load them (media.go).
//
// GET /v1/models, GET /health, POST /reset_prefix_cache, GET /metrics
// (Prometheus text: vllm:num_requests_running/waiting, prompt and generation
// token counters, prefix cache queries/hits, the latency histograms below,
// and the mock's own event lateness quantiles). A chat stream is: a role-only chunk
// {"role":"assistant","content":""}, content chunks, the last of which
// carries finish_reason, the usage chunk when asked, then data: [DONE].
// A Responses stream is vLLM's (response.created, in_progress, per output
// item its added, delta and done events, response.completed or
// response.incomplete with the usage); a Messages stream Anthropic's
// (message_start and ping, content blocks, message_delta, message_stop).
// Bad bodies get the API's error JSON: vLLM's
// {"error":{"message":...,"type":"BadRequestError","param":...,"code":400}},
// for Messages Anthropic's {"type":"error","error":{"type":...,"message":...}}.
// Messages requests need no anthropic-version or x-api-key header, as in
// vLLM; Config.StrictAnthropic requires both (400, 401) as Anthropic does.
// The prompt of every generating API is read as chat messages (role and
// text) and counted with Config.Tokens, so the prefix cache and the
// messages hash work the same across them; tool_use blocks, function_call
// items and thinking add no text, as chat's tool calls and reasoning in
// history do not.
//
// # Reasoning
//
// An answer may start with a reasoning phase: ReasoningHeader sets its
// tokens, else Latency.ReasoningMean draws them (0: none). They are the
// first output tokens, streamed on the same model (prefill, then decode
// events) as the API's reasoning: chat "reasoning" deltas (vLLM's current
// name; its older reasoning_content is read by tracekit too), Responses
// response.reasoning_text.delta in a reasoning item, Messages
// thinking_delta in a thinking block (with a signature_delta); usage
// reports them (completion_tokens_details.reasoning_tokens,
// output_tokens_details). An event never holds both reasoning and answer
// tokens. Completions, chat reasoning_effort "none", Responses
// reasoning.effort "none" and Messages thinking disabled get none;
// Messages thinking.budget_tokens caps them.
//
// # Responses state
//
// A Responses answer's transcript (its input after the history it
// continued, then the answer) is kept under its id, resp_<request id>,
// unless the request said "store": false, in a store bounded by
// Config.ResponseStoreBytes (least recently used first out). A request
// naming it in previous_response_id gets its instructions, that
// transcript, then its own input as the prompt; an id not in the store is
// a 404 ("Response with id '...' not found.").
//
// # Embeddings, rerank, score
//
// They hold a batch slot for the prefill of every sequence they compute
// (an embedding input, a rerank query with each document, a score pair):
// PrefillBase + PrefillPerToken x their input tokens, no prefix cache,
// then one JSON body. Embeddings are a fixed pattern of
// EmbeddingDimensions values; scores a number in [0, 1) fixed by the seed
// and the text.
//
// # Tool calls
//
// A chat request whose tool_choice is "required" or names a function
// ({"type":"function","function":{"name":...}}) is answered with one tool
// call (of the named function, else the first of its tools), and so are a
// Responses request's ("required", {"type":"function","name":...}) and a
// Messages request's ({"type":"any"}, {"type":"tool","name":...}); the request
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
// {"arguments"}} pieces (an event never spans two calls: each is one
// call's fragment, as vLLM's tool parsers emit them); the timing of every
// event is the latency model's, as for text. A non-streaming answer has
// content null and message.tool_calls. Responses answers function_call
// items, Messages tool_use blocks. The log's tool_calls column counts the
// calls sent.
//
// Every response carries X-Request-Id: the request's own X-Request-Id
// header when it has one (replay sends its ids there), else a generated id.
// The log is keyed by it.
//
// # Request flow
//
// A handler reads and validates the body (the API's parser fills one
// genRequest, or a poolRequest for embeddings, rerank and score), counts
// the prompt (Config.Tokens,
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
// comes alone at TTFT (chat sends its role chunk at the same moment, a
// Responses or Messages stream its opening events in the same write); every
// following event carries TokensPerEvent tokens (fewer at the end of the
// reasoning or of a tool call) and is due the sum of their ITLs after the
// previous one. With Latency.SpecK > 0 (speculative decoding) an event is
// one decode step instead: 1 + the accepted ones of SpecK draft tokens,
// each accepted with probability SpecAccept until the first rejection, due
// one ITL after the previous, and counted in vLLM's vllm:spec_decode_*
// counters. Output counts reasoning: a reasoning phase of R tokens is
// followed by the drawn answer length, R plus it capped at max_tokens. max_tokens defaults to MaxModelLen minus the
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
// the hit; a chat request with media also gets vLLM's
// prompt_tokens_details.multimodal_tokens (its media tokens by kind).
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
//	error[@N]            the API's in-stream error event when event N (default 1)
//	                     is due, and the end: chat and completions
//	                     {"error":{...}} then data: [DONE] (vLLM's way),
//	                     Responses an "error" event, Messages an "error" event
//	                     of type overloaded_error, both with nothing after;
//	                     a non-streamed answer gets a 500 error body instead
//	nodone               the stream ends without its terminal event (data: [DONE],
//	                     response.completed, message_stop)
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
// Every fault applies to every API in its own shapes (a cut Messages
// stream ends without message_stop; error bodies are the API's). For
// embeddings, rerank and score the body is event 1: a positional fault at
// 0 or 1 acts on it.
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
// ReadLog; in memory with Config.KeepLog): request id, its API (endpoint),
// arrival in monotonic and wall ns, when headers were flushed, admission,
// status, outcome, fault, token counts (reasoning among them), messages
// count and hash, items returned by embeddings, rerank and score, and per
// event the CLOCK_MONOTONIC ns right after its write and flush returned,
// its tokens and its lateness against the schedule; first_answer_event
// marks where the reasoning events end. The file metadata (LogMeta) holds the config, the
// server start in monotonic and wall ns, and final Stats. Rows are flushed
// in row groups of trace.RowGroupRows, so memory stays bounded; Close
// completes the file.
package mock
