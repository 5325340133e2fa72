// Package trace owns tracekit's two file formats and nothing else encodes or
// decodes them:
//
//   - a trace (one row per request turn, type Turn) is what synth writes and
//     replay reads: conversations, their arrival offsets, think times and
//     messages;
//   - a recording (one row per request attempt, type Record) is what replay
//     and the capture proxy write and analyze reads: when each request was
//     meant to go out, when it did, and the raw arrival time of every streamed
//     event.
//
// Both are zstd-compressed Parquet with plain column types (int64 nanoseconds,
// UTF-8 strings, standard LIST layout) so that pandas, polars and DuckDB read
// them without surprises. A recording's event times are the exception: they
// are kept to the microsecond (±0.5 µs, below the stamps' own accuracy), as
// gaps of whole microseconds from the request's send, held in doubles
// (gaps.go says why); in memory,
// Record.EventNs is nanoseconds like every other time. File-level key-value metadata names the format and
// its schema version; Open refuses a file of the wrong kind or of a newer
// version.
//
// Data flow: a producer calls NewTraceWriter / NewRecordWriter, writes rows in
// order, and closes; a consumer calls OpenTrace / OpenRecording and reads rows
// in batches. Writers flush a row group every RowGroupRows rows, so memory is
// bounded whatever the file size. ReadTurns and ReadRecords read a whole
// (small) file at once; OpenScanner reads a recording once, decoding only
// the columns asked for, column by column, the next row group on a
// goroutine of its own while the caller reads the current one (what
// analyze uses, fast);
// the media file beside a trace (MediaPath) holds its real media items'
// bytes once per SHA-256: MediaWriter.Put stores them, OpenMediaFile indexes
// the hashes and MediaStore.Load reads one item and verifies it;
// Record.Shift aligns the shards of one run; SummarizeTrace and SummarizeRecording are what
// `tracekit inspect` prints.
package trace
