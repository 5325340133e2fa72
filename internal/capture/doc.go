// Package capture is the recording proxy (tracekit capture): a server in
// front of a real one that forwards traffic untouched and records it as a
// replayable trace plus a recording.
//
//	client ──> h1proxy.Server (the HTTP layer: forwards every request and response;
//	              │ ProxyConfig.Stack: its own HTTP/1.1 stack or net/http's)
//	              │ tells its Tap, the Proxy (exchange.go), what it forwarded:
//	              │ Open: an API's path? (apis.ByPath) then its body, response head,
//	              │ each read of the response body, stamped: the recorder keeps it
//	              │ for a record.Stream, which parses an event stream 4 KiB at a
//	              │ time when the stack's event loop forwards it and the rest when
//	              │ the body ends (recorder.late); a compressed body is decoded on a
//	              │ goroutine in lock step with the reads (decode.go)
//	              │ End: the request body ──> its API's ParseRequest (llmcall.go), after the response
//	              v
//	          account (account.go): conversation, trace turn, recording row (accounting worker)
//	              v
//	          segment (segment.go; opened and rotated by age or size in rotate.go)
//	              ├─> record.Recorder ──> *.recording.parquet (as requests finish)
//	              └─> trace journal ──> *.trace.parquet (sorted, written when the segment closes)
//
// In: HTTP requests. Recorded: POSTs to the path of an API of
// internal/api/apis (chat, completions, Responses, Messages, embeddings,
// rerank, score, speech-to-text's multipart uploads), except those carrying ProbeHeader (tracekit's own
// probes, forwarded only). Each request body is read by its API's
// ParseRequest into an api.Call, and its response by its API's decoder
// (record.Stream.SetAPI); rows and turns carry the endpoint (turns of
// chat and completions keep it empty, replay's --endpoint). A request
// without "stream": true is a non-streaming turn and record: one event,
// the body completely read, carrying every completion token. Known LLM
// endpoints it cannot parse (Ollama's /api/chat, TGI's /generate, ...)
// are forwarded and warned about once per path.
// Everything else is forwarded only. A gzip or deflate response (sent
// whatever the client asked) is forwarded compressed and decoded for
// parsing on a goroutine in lock step with the reads (decode.go), so each
// event keeps the stamp of the read that completed it; another encoding is
// recorded as malformed, saying so.
//
// Media in requests (images, video, audio; api.ReadItem probes each) are
// kept on their messages (media.go): by content hash, the bytes stored
// once in the segment's media file (trace.MediaWriter, trace.MediaPath),
// or, with RedactContent, as synthetic items of the same kind, format and
// shape. Parts given by URL are counted and warned about, not recorded.
//
// Out: per segment, a trace, its media file when it has real media, and a
// recording named
// capture-<start>-<segment>; a taken name (an earlier run's file or
// journal) is never replaced: the segment takes the next free name
// (-2, -3...). Files are written under a .partial name and renamed into
// place. A trace's rows are sorted, so its file is written when the
// segment closes; until then each turn is written to a journal as it is
// accounted (fsync'd every SyncEvery), which record.Recover also converts.
//
// Requests carrying a history (chat, Responses, Messages) are grouped into
// conversations by it (conversations.go), a Responses request naming
// previous_response_id with the turn whose answer had that id, or by a
// session header. Goroutines: the HTTP layer's
// (h1proxy; ended by ProxyServer.Shutdown, which closes idle connections
// at once and cuts the rest after its grace), one rotation ticker and one
// accounting worker (its queue holds at most Queue jobs; when full, the
// next exchange's End waits), one decoder per compressed response in
// flight (ended by its End), one closer per retired segment; Close waits
// for all of them and for every exchange watched.
package capture
