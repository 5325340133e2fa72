// Package record observes LLM response streams and keeps them. replay and
// calibrate use it as a client; the capture proxy uses the same pieces in
// front of a real server, so all of them write identical records.
//
// Data flows in three steps:
//
//	network read ──> Stream.Feed / Stream.ReadBody    stamp first, then parse
//	                      │ events, text, usage
//	                 Stream.Fill(rec)                  one trace.Record per request
//	                 Stream.Verdict()                  the parser's finding
//	                 Outcome.Kind()                    the record's ErrorKind, from the verdict and the transport
//	                      │
//	                 Sink.Submit(rec)                  copies (error message scrubbed of secrets), never waits on disk
//	                      │
//	   Recorder:     bounded channel ──> writer goroutine ──> journal (fsync'd every SyncEvery)
//	                                                      ──> Parquet (row groups of trace.RowGroupRows)
//	                 Recorder.Close ──> footer, rename into place, journal removed
//	   Memory:       kept in memory (tests, calibrate)
//
// Stream is an incremental Server-Sent Events parser. Every event gets the
// stamp of the network read that completed it, taken when Read returned and
// before any parsing, so parsing cost never shifts a time. The stamp is
// whatever the caller's clock says then: replay's kernel stamp modes pass a
// clock that returns the kernel's receive time of the read instead. The
// Stream owns the framing (SSE lines and events, size bounds), the stamps
// and the buffers; what an event means is the request's API's: SetAPI
// picks its decoder (internal/api: chat and completions by default,
// Responses, Messages, embeddings, rerank, score), which reads only the
// JSON keys a recording needs with an allocation-free scanner and appends
// the text to the Stream's buffers.
// Tokens per event are exact deltas of cumulative usage when the server
// sends continuous usage stats (vLLM's continuous_usage_stats), otherwise
// counted from the event's text with a TokenCounter at Fill time, off the
// read path.
//
// Outcome is the one classifier of a request's error kind: replay and
// capture note what their exchange saw (how far it got, what failed,
// whether the requester had gone, the parser's verdict and [DONE]) and
// Kind decides, in a fixed precedence, so a client and a proxy record the
// same kind for the same event on the wire.
//
// Recorder is the crash-safe Sink: it owns one output file. A SIGKILL loses
// at most SyncEvery (1 s by default) of records: the journal next to the
// file (JournalPath; its encoding lives in trace/journal.go) holds every
// record fsync'd so far, and Recover (tracekit recover, or the next
// NewRecorder on the same path, reported by Recovered) turns it into a
// valid recording.
//
// Stream.ReadBody is called so rather than ReadFrom, which go vet reserves
// for io.ReaderFrom's signature.
package record
