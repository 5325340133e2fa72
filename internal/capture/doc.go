// Package capture is the recording proxy (tracekit capture): a server in
// front of a real one that forwards traffic untouched and records it as a
// replayable trace plus a recording.
//
//	client ──> ProxyServer (server.go, conn.go: own HTTP/1.1, one goroutine per connection)
//	              │ Proxy.serve (forward.go) ──> rawForward (own HTTP/1.1 client, upstream.go pool)
//	              │                          or rtForward (http.RoundTripper: https, ProxyConfig.Transport)
//	              │ upstream connections (Linux): raw sockets an evloop owns for their whole life
//	              │ (loop_linux.go, own epoll, edge-triggered, never on the runtime's poller;
//	              │ the idle loop waits for its epoll descriptor on the runtime's poller);
//	              │ the request's goroutine writes the request; the evloop reads the response:
//	              │ a plain head (head.go) it parses and writes with the first events, any
//	              │ other it hands back for net/http to read; a response body: forwarded by
//	              │ the evloop: each upstream arrival read
//	              │ once, written to the client socket as it is (chunked framing passed through,
//	              │ scanned in place by framing.go), then stamped and kept for a record.Stream,
//	              │ which parses an event stream 4 KiB at a time and the rest when the body
//	              │ ends (forward.go, recorder.late); a slow client's body, a compressed one (and every body
//	              │ elsewhere than Linux, through net.Conn) is forwarded the same way by its
//	              │ request's goroutine; watch.go notices a client that goes away
//	              │ request body ──> parseLLMCall (llmcall.go), after the response
//	              v
//	          account (account.go): conversation, trace turn, recording row (accounting worker)
//	              v
//	          segment (segment.go; opened and rotated by age or size in rotate.go)
//	              ├─> record.Recorder ──> *.recording.parquet (as requests finish)
//	              └─> trace journal ──> *.trace.parquet (sorted, written when the segment closes)
//
// In: HTTP requests. Recorded: POSTs to .../chat/completions and
// .../completions, except those carrying ProbeHeader (tracekit's own
// probes, forwarded only). A request without "stream": true is a
// non-streaming turn and record: one event, the body completely read,
// carrying every completion token. Known LLM endpoints it cannot parse
// (Ollama's /api/chat, ...) are forwarded and warned about once per path.
// Everything else is forwarded only. A gzip or deflate response (sent
// whatever the client asked) is forwarded compressed and decoded for
// parsing on a goroutine in lock step with the reads (decode.go), so each
// event keeps the stamp of the read that completed it; another encoding is
// recorded as malformed, saying so.
//
// Out: per segment, a trace and a recording named
// capture-<start>-<segment>; a taken name (an earlier run's file or
// journal) is never replaced: the segment takes the next free name
// (-2, -3...). Files are written under a .partial name and renamed into
// place. A trace's rows are sorted, so its file is written when the
// segment closes; until then each turn is written to a journal as it is
// accounted (fsync'd every SyncEvery), which record.Recover also converts.
//
// Requests are grouped into conversations by message history
// (conversations.go) or a session header. Goroutines: the accept loop and
// one per client connection (ended by ProxyServer.Shutdown, which closes
// idle connections at once and cuts the rest after its grace), one evloop
// (ended by Close once no handler runs), one
// disconnect watcher per response in flight (ended by its forward), one
// rotation ticker and one accounting worker (its queue holds at most
// Queue jobs; when full, the next handler waits), one decoder per
// compressed response in flight (ended by its forward), one closer per
// retired segment; Close waits for all of them and for every handler, and
// closes the idle upstream connections.
package capture
