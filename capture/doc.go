// Package capture observes LLM response streams and records them. Replay
// uses it as a client; the capture proxy uses the same pieces in front of a
// real server, so both write identical records.
//
// Data flows in three steps:
//
//	network read ──> Stream.Feed / Stream.ReadBody    stamp first, then parse
//	                      │ events, text, usage
//	                 Stream.Fill(rec)                  one trace.Record per request
//	                      │
//	                 Recorder.Submit(rec)              copies, hands to the writer
//	                      │ bounded channel
//	                 writer goroutine ──> journal (fsync'd every SyncEvery)
//	                                  ──> Parquet (row groups of trace.RowGroupRows)
//	                 Recorder.Close ──> footer, rename into place, journal removed
//
// Stream is an incremental Server-Sent Events parser. Every event gets the
// stamp of the network read that completed it, taken when Read returned and
// before any parsing, so parsing cost never shifts a time. It reads only
// the JSON keys a recording needs (choices[].delta.content, .text,
// reasoning_content, usage, error) with a small allocation-free scanner.
// Tokens per event are exact deltas of cumulative usage when the server
// sends continuous usage stats (vLLM's continuous_usage_stats), otherwise
// counted from the event's text with a TokenCounter at Fill time, off the
// read path.
//
// Recorder owns one output file. A SIGKILL loses at most SyncEvery (1 s by
// default) of records: the journal next to the file (JournalPath) holds
// every record fsync'd so far, and Recover (tracekit recover, or the next
// replay start) turns it into a valid recording.
//
// Proxy (tracekit capture) is an http.Handler in front of a real server.
// Each upstream read is written and flushed to the client first, then
// stamped and parsed by a Stream, so the client sees every event as soon
// as the proxy does. Requests are grouped into conversations by message
// history (conversations.go) or a session header. Each segment of time
// (rotated by age or buffered size) writes a recording through a Recorder
// as requests finish and a trace (sorted, so written when the segment
// closes; until then its turns go to a journal fsync'd every SyncEvery, which
// Recover also converts). StartProxy runs it on a listener, like
// httptest.Server.
//
// Stream.ReadBody is called so rather than ReadFrom, which go vet reserves
// for io.ReaderFrom's signature.
package capture
