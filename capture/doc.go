// Package capture is the recording proxy (tracekit capture): an
// http.Handler in front of a real server that forwards traffic untouched
// and records it as a replayable trace plus a recording.
//
//	client ──> Proxy.ServeHTTP ──> upstream
//	              │ each upstream read: written and flushed to the client first,
//	              │ then stamped and parsed by a record.Stream
//	              v
//	          segment (rotated by age or buffered size)
//	              ├─> record.Recorder ──> *.recording.parquet (as requests finish)
//	              └─> trace journal ──> *.trace.parquet (sorted, written when the segment closes)
//
// Requests are grouped into conversations by message history
// (conversations.go) or a session header. A trace's rows are sorted, so its
// file is written when the segment closes; until then its turns go to a
// journal fsync'd every SyncEvery, which record.Recover also converts.
// StartProxy runs the proxy on a listener, like httptest.Server.
package capture
