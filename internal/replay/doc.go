// Package replay sends a trace to one or more OpenAI-compatible servers with
// exact timing and hands every finished request to a record.Sink
// (record.Recorder, record.Memory).
//
// Record(ctx, cfg, src, open) is a whole run: New (the clients), Prepare
// (below), open (the sink, created only once the targets passed), Run. Each
// Run keeps its clock, counters and sink in a run value of its own.
//
// Data flow:
//
//	Source (FileSource: a trace file read a batch at a time, one
//	conversation held at once; MemorySource) ──> conversations in start order
//	(the shard's first batch read, and its redacted first turns filled,
//	before the clock starts: source.go prime)
//	                    │
//	                    v
//	schedule: each conversation starts at its offset (÷ --speed) from the run
//	start, woken by a Dispatcher (clock.Precise: an absolute CLOCK_MONOTONIC
//	timerfd in Go's netpoller releases each waiter a little early and the
//	waiter busy-waits the rest)
//	                    │
//	                    v
//	conversation loop (closed loop): build turn k's body, wait for its send
//	time and a concurrency slot (queue time), send it, read the stream
//	through record.Stream, encode the server's answer (or the reference
//	answer) into the history, think, send k+1. With --timing trace every
//	turn is sent at its own arrival offset instead, its body built before.
//	Bodies (request.go, over internal/api/chat and completions) are a fixed head, the history encoded once message
//	by message as it grew (never encoded again per turn), the turn's new
//	messages and a fixed tail.
//	A conversation whose turns carry Parents runs as a graph (graph.go):
//	each node when its parents finished, branches concurrently.
//	                    │ one trace.Record per attempt
//	                    v
//	record.Sink (record.Recorder: one writer goroutine owns the file;
//	Submit never blocks on disk)
//
// Look-ahead (materialize.go): a trace with virtual prompts or media runs
// behind a prefetch stage that, before each conversation is due, makes
// its virtual text and media bytes and loads its real media items from
// the trace's media file (trace.MediaStore, realmedia.go: every hash the
// trace names is checked to be there before the run, each item's SHA-256
// as it is loaded), bounded in conversations and bytes.
//
// Client (h1.go): one HTTP/1.1 client per target, with a pool of
// keep-alive connections. fasthttp's Request builds and writes a request
// and its ResponseHeader parses the answer's headers; the body (Content-
// Length, chunked: package chunked, or until close) is read by replay's own
// reader, each Read one read of the network at most, and the connection
// goes back to the pool once the body's end was read. A streamed body on a
// kernel-stamped connection without TLS is read by the stamp package's
// poller instead (push.go): it undoes the framing and feeds the parser on
// the poller's goroutine, and the request's goroutine waits for the end,
// its deadline, its idle timeout or the run's cancel.
// Every connection is wrapped (conn.go, above TLS, which dial does itself)
// so that the run can stamp when a request's bytes were written, apply the
// idle timeout as a read deadline before each Read, and interrupt every
// in-flight read when the run is canceled (signal, --benchmark-timeout).
// Beneath it, in a kernel stamp mode, the TCP connection is a stamp.Conn
// (package stamp) read with recvmsg: each read keeps the kernel's receive
// stamp, and the body parser's clock (runState.bodyClock, stamp.go)
// returns it, run-relative, instead of the time the goroutine ran;
// kernel-offset (the default) adds reads handed out one event at a time
// and an arrival observer, a child process of this executable: a program
// that runs replays calls stamp.ObserverMain first in main. Replay picks
// the requested mode from Config.StampMode and counts its https targets;
// the mode used, and why, is in RunMeta.Stamps.
//
// Keep-alive: servers close idle connections silently (uvicorn after 5 s).
// A pooled connection idle longer than Config.IdleConnTimeout is closed,
// never given to a request. A request
// that went out on a reused connection and got EOF or a reset before any
// response byte is sent once more on a fresh connection (with
// Connection: close, so the next request dials anew): Record.Attempt 1, request id
// "-1", no error. Nothing is retried after a response byte. --duration and --max-requests
// only stop new requests: those in flight finish.
//
// Agentic graphs (graph.go): a node is sent ThinkTimeNs after its last
// parent's done time, with the parents' transcripts merged (a shared
// prefix once; internal/history holds the rule, synth checks imported
// graphs with the same) as history; the answer carries its tool calls (the
// recorded message when they do not match the trace's: Record.
// ToolCallMismatch); a failed parent's descendants are recorded as
// trace.ErrParentFailed without traffic. Bodies carry Turn.Tools,
// Turn.ToolChoice, assistant tool_calls and tool_call_id (request.go).
//
// APIs (apis.go): each turn goes to its trace's endpoint (Config.Endpoint
// for a turn without one, or for every turn with Config.EndpointOverride),
// at the path apiPaths gives. Chat and completions bodies are the run's
// own encoding above; a conversation with a turn on another API has every
// body encoded whole by its API's package (internal/api/responses,
// messages, embeddings, rerank: AppendRequest), from the same history of
// live or reference answers. Each request sets the Stream's API
// (record.Stream.SetAPI) and its record says its endpoint, reasoning
// tokens, first answer event and items. Turns an endpoint cannot carry
// are refused before the run (checkEndpoints: New's error).
//
// Non-streaming turns (trace.Turn.NonStreaming) are sent with "stream":
// false; the body is read whole and parsed as one event stamped when the
// read completed (Record.NonStreaming, EventTokens = the completion tokens).
//
// Before the clock (Prepare, which Run calls unless the caller did): the ready checks, the model lookup, the prefix-cache
// reset and one tiny probe request per target, all marked with
// ProbeHeader. The probe fails the run when a target is unreachable or
// refuses the request (wrong model), and settles continuous usage by
// looking at the events it got (RunMeta.Usage).
//
// Error kinds: an exchange notes what it saw (outcome.go: the stage it
// reached, a transport, deadline or decoding failure, the run's
// cancellation, the parser's verdict) and record.Outcome.Kind, the
// classifier capture shares, decides the kind in its documented precedence.
//
// Run lifetime: Run returns when every conversation has finished or the run
// context ends; in the latter case every in-flight request is recorded as
// canceled with the events it had received, and the recording is closed
// valid. Health (dispatch lag, Go scheduler latency, CPU, RSS) is measured
// over the run and stored in the recording's RunMeta.
//
// Distributed runs (start.go, source_url.go): with Config.StartAt the
// clock starts, once prepared, at that wall instant converted to the
// monotonic clock (StartError if it has passed; Run then returns a nil
// Result: nothing was sent); RunMeta gets the run id shared by the shards,
// the shard and the host clock's sync state. FetchTrace downloads a trace
// URL into a local file first.
package replay
