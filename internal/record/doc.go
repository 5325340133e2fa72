// Package record observes LLM response streams and keeps them. replay and
// calibrate use it as a client; the capture proxy uses the same pieces in
// front of a real server, so all of them write identical records.
//
// Data flows in three steps:
//
//	network read ──> Stream.Feed / Stream.ReadBody    stamp first, then parse
//	                      │ events, text, usage
//	                 Stream.Fill(rec)                  one trace.Record per request
//	                 Stream.Verdict()                  the parser's finding (the caller sets ErrorKind)
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
// clock that returns the kernel's receive time of the read instead. It reads only
// the JSON keys a recording needs (choices[].delta.content, .text,
// reasoning_content, usage, error, and tool calls: toolcalls.go) with a
// small allocation-free scanner.
// Tokens per event are exact deltas of cumulative usage when the server
// sends continuous usage stats (vLLM's continuous_usage_stats), otherwise
// counted from the event's text with a TokenCounter at Fill time, off the
// read path.
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
