package trace

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// RowGroupRows is how many rows a writer buffers before flushing a row
// group: it bounds a writer's memory and a reader's batch.
const RowGroupRows = 4096

// ErrWrongFormat and ErrNewerVersion are wrapped by the Open functions so
// callers can tell a bad file from an unreadable one.
var (
	ErrWrongFormat  = errors.New("not a tracekit file of the expected kind")
	ErrNewerVersion = errors.New("schema version newer than this tracekit reads")
	// ErrInvalidTurn is wrapped by TraceReader.Read when a row fails
	// Turn.Check: bad input, not a failed run.
	ErrInvalidTurn = errors.New("invalid trace row")
)

// invalidTurn is a Turn.Check error that is ErrInvalidTurn, its message
// unchanged.
type invalidTurn struct{ err error }

func (e invalidTurn) Error() string        { return e.err.Error() }
func (e invalidTurn) Unwrap() error        { return e.err }
func (e invalidTurn) Is(target error) bool { return target == ErrInvalidTurn }

// FileFormat names one kind of tracekit Parquet file: Name is stored under
// MetaFormat, Version under MetaSchemaVersion; a reader refuses a file of
// another name or of a newer version.
type FileFormat struct {
	Name    string
	Version int
}

// The formats of this package's two files.
var (
	TraceFormat     = FileFormat{FormatTrace, TraceSchemaVersion}
	RecordingFormat = FileFormat{FormatRecording, RecordingSchemaVersion}
)

// ParquetWriter streams rows of T into a zstd Parquet file of one
// FileFormat (the trace, the recording, analyze's per-request file, the
// mock's log): a row group every RowGroupRows rows, so memory is bounded;
// JSON metadata set before Close goes into the footer.
type ParquetWriter[T any] struct {
	f        *os.File
	w        *parquet.GenericWriter[T]
	buffered int
	rows     int64
}

// CreateParquet creates path (replacing a file there) for rows of T.
func CreateParquet[T any](path string, format FileFormat) (*ParquetWriter[T], error) {
	return createParquet[T](path, format, &zstdCodec{level: zstd.SpeedDefault})
}

func createParquet[T any](path string, format FileFormat, codec *zstdCodec, opts ...parquet.WriterOption) (*ParquetWriter[T], error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	w := parquet.NewGenericWriter[T](f, append([]parquet.WriterOption{
		parquet.Compression(codec),
		parquet.KeyValueMetadata(MetaFormat, format.Name),
		parquet.KeyValueMetadata(MetaSchemaVersion, strconv.Itoa(format.Version)),
	}, opts...)...)
	return &ParquetWriter[T]{f: f, w: w}, nil
}

// Write appends rows.
func (w *ParquetWriter[T]) Write(rows ...T) error { return w.write(rows) }

// Rows is the number of rows written so far.
func (w *ParquetWriter[T]) Rows() int64 { return w.rows }

// SetMeta stores v as JSON under key in the footer (the last value set
// before Close wins).
func (w *ParquetWriter[T]) SetMeta(key string, v any) error { return w.setJSON(key, v) }

// Flush ends the current row group early (the file is still unreadable
// until Close: Parquet's footer is written last).
func (w *ParquetWriter[T]) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("flushing row group to %s: %w", w.f.Name(), err)
	}
	w.buffered = 0
	return nil
}

// Close writes the footer, syncs and closes the file.
func (w *ParquetWriter[T]) Close() error { return w.close() }

// Abort closes the file without finishing it (after an error).
func (w *ParquetWriter[T]) Abort() { w.f.Close() }

func (w *ParquetWriter[T]) write(rows []T) error {
	for len(rows) > 0 {
		n := min(len(rows), RowGroupRows-w.buffered)
		if _, err := w.w.Write(rows[:n]); err != nil {
			return fmt.Errorf("writing rows to %s: %w", w.f.Name(), err)
		}
		rows = rows[n:]
		w.buffered += n
		w.rows += int64(n)
		if w.buffered == RowGroupRows {
			if err := w.w.Flush(); err != nil {
				return fmt.Errorf("flushing row group to %s: %w", w.f.Name(), err)
			}
			w.buffered = 0
		}
	}
	return nil
}

func (w *ParquetWriter[T]) setJSON(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s metadata: %w", key, err)
	}
	w.w.SetKeyValueMetadata(key, string(b))
	return nil
}

// close writes the footer, syncs and closes the file.
func (w *ParquetWriter[T]) close() error {
	if err := w.w.Close(); err != nil {
		w.f.Close()
		return fmt.Errorf("finishing %s: %w", w.f.Name(), err)
	}
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return fmt.Errorf("syncing %s: %w", w.f.Name(), err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", w.f.Name(), err)
	}
	return nil
}

// stampVersion replaces the schema version the footer will hold.
func (w *ParquetWriter[T]) stampVersion(v int) {
	w.w.SetKeyValueMetadata(MetaSchemaVersion, strconv.Itoa(v))
}

// TraceWriter streams Turn rows into a trace file. Callers write rows in the
// documented sort order; the writer does not sort. The file is stamped
// with the oldest schema version that holds its rows (see
// TraceSchemaVersion), so a trace without wait-only edges stays readable
// by a version-2 tracekit.
type TraceWriter struct {
	w       *ParquetWriter[Turn]
	version int // the version stamped so far: the newest its rows need
}

// NewTraceWriter creates path and writes meta into its footer on Close.
func NewTraceWriter(path string, meta TraceMeta) (*TraceWriter, error) {
	return NewTraceWriterWith(path, meta, TraceWriterOptions{})
}

// TraceWriterOptions tune a TraceWriter.
type TraceWriterOptions struct {
	// FastCompression writes at zstd's fastest level instead of its
	// default: for traces of stored text, where compressing the text is
	// most of the time to write them and the files grow a little. Traces
	// of numbers (virtual prompts) compress much worse at that level.
	// Every zstd reader reads either.
	FastCompression bool
}

// NewTraceWriterWith is NewTraceWriter with options.
func NewTraceWriterWith(path string, meta TraceMeta, o TraceWriterOptions) (*TraceWriter, error) {
	level := zstd.SpeedDefault
	if o.FastCompression {
		level = zstd.SpeedFastest
	}
	w, err := createParquet[Turn](path, FileFormat{FormatTrace, traceVersionBase}, &zstdCodec{level: level})
	if err != nil {
		return nil, err
	}
	if err := w.setJSON(MetaTrace, meta); err != nil {
		w.f.Close()
		return nil, err
	}
	return &TraceWriter{w: w, version: traceVersionBase}, nil
}

// Write appends rows.
func (t *TraceWriter) Write(rows ...Turn) error {
	for i := range rows {
		if t.version == TraceSchemaVersion {
			break
		}
		if v := rows[i].schemaVersion(); v > t.version {
			t.version = v
			t.w.stampVersion(v)
		}
	}
	return t.w.write(rows)
}

// Rows is the number of rows written so far.
func (t *TraceWriter) Rows() int64 { return t.w.rows }

// Close finishes the file; it is unreadable until then.
func (t *TraceWriter) Close() error { return t.w.close() }

// SetMeta replaces the metadata written on Close (a streamed import knows
// its counts only at the end).
func (t *TraceWriter) SetMeta(meta TraceMeta) error { return t.w.setJSON(MetaTrace, meta) }

// RecordWriter streams Record rows into a recording file, stamped with
// the oldest schema version that holds its rows (see
// RecordingSchemaVersion).
type RecordWriter struct {
	w       *ParquetWriter[recordRow]
	version int // the version stamped so far: the newest its rows need
	// scratch and gaps hold the rows' on-disk form during a Write.
	scratch []recordRow
	gaps    []float64
}

// NewRecordWriter creates path. meta is written on Close, so fields known
// only at the end (Health) can be set with SetRunMeta before then.
func NewRecordWriter(path string, meta RunMeta) (*RecordWriter, error) {
	w, err := createParquet[recordRow](path, FileFormat{FormatRecording, recordingVersionBase},
		&zstdCodec{level: zstd.SpeedDefault, byteStreams: true}, recordWriterOptions...)
	if err != nil {
		return nil, err
	}
	rw := &RecordWriter{w: w, version: recordingVersionBase}
	if err := rw.SetRunMeta(meta); err != nil {
		w.f.Close()
		return nil, err
	}
	return rw, nil
}

// SetRunMeta replaces the run metadata written on Close.
func (r *RecordWriter) SetRunMeta(meta RunMeta) error { return r.w.setJSON(MetaRun, meta) }

// Write appends rows. A row whose events are too far apart for the file
// to hold exactly (see appendGapsUs) fails the call, naming it, and none
// of rows is written.
func (r *RecordWriter) Write(rows ...Record) error {
	disk, err := diskRows(rows, &r.scratch, &r.gaps, r.w.rows)
	if err != nil {
		clear(r.scratch[:min(len(rows), cap(r.scratch))])
		return fmt.Errorf("writing rows to %s: %w", r.w.f.Name(), err)
	}
	for i := range rows {
		if r.version == RecordingSchemaVersion {
			break
		}
		if v := rows[i].schemaVersion(); v > r.version {
			r.version = v
			r.w.stampVersion(v)
		}
	}
	err = r.w.write(disk)
	clear(r.scratch[:min(len(rows), cap(r.scratch))]) // hold no row's strings past the call
	return err
}

// Rows is the number of rows written so far.
func (r *RecordWriter) Rows() int64 { return r.w.rows }

// Flush ends the current row group early (the file is still unreadable
// until Close: Parquet's footer is written last).
func (r *RecordWriter) Flush() error { return r.w.Flush() }

// Close finishes the file.
func (r *RecordWriter) Close() error { return r.w.close() }

// ParquetReader reads rows of T from a file of one FileFormat, in row
// order.
type ParquetReader[T any] struct {
	path string
	f    *os.File
	pf   *parquet.File
	r    *parquet.GenericReader[T]
}

// OpenParquet opens path, checks its format name and schema version (up
// to format.Version) and returns the reader.
func OpenParquet[T any](path string, format FileFormat) (*ParquetReader[T], error) {
	return openParquet[T](path, format, nil)
}

// openParquet is OpenParquet with reader options chosen from the file's
// schema (nil: none); an error from options refuses the file.
func openParquet[T any](path string, format FileFormat, options func(*parquet.Schema) ([]parquet.ReaderOption, error)) (*ParquetReader[T], error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is not a readable Parquet file (empty, truncated, or another format; a recording cut short by SIGKILL can be recovered with 'tracekit recover'): %w", path, err)
	}
	got, _ := pf.Lookup(MetaFormat)
	if got != format.Name {
		f.Close()
		if got == "" {
			got = "no tracekit format key"
		}
		return nil, fmt.Errorf("%s: expected a %s file, found %s: %w", path, format.Name, got, ErrWrongFormat)
	}
	vs, _ := pf.Lookup(MetaSchemaVersion)
	v, err := strconv.Atoi(vs)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: schema version %q is not an integer: %w", path, vs, ErrWrongFormat)
	}
	if v > format.Version {
		f.Close()
		return nil, fmt.Errorf("%s: schema version %d, this tracekit reads up to %d (upgrade tracekit): %w", path, v, format.Version, ErrNewerVersion)
	}
	var opts []parquet.ReaderOption
	if options != nil {
		if opts, err = options(pf.Schema()); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return &ParquetReader[T]{path: path, f: f, pf: pf, r: parquet.NewGenericReader[T](pf, opts...)}, nil
}

// NumRows is the number of rows in the file.
func (r *ParquetReader[T]) NumRows() int64 { return r.pf.NumRows() }

// Read fills rows and returns how many it read; io.EOF at the end. The
// reader may reuse the slices already in rows: copy a row's lists before
// handing the same rows to Read again.
func (r *ParquetReader[T]) Read(rows []T) (int, error) { return r.read(rows) }

// Meta decodes the JSON stored under key into v; a missing key leaves v
// as it is.
func (r *ParquetReader[T]) Meta(key string, v any) error { return r.json(key, v) }

// Close releases the file.
func (r *ParquetReader[T]) Close() error { return r.close() }

// ReadAll reads every remaining row into a fresh slice (no row shares list
// storage with another).
func (r *ParquetReader[T]) ReadAll() ([]T, error) { return readAll(r.pf.NumRows(), r.read) }

// ReadParquet reads a whole file of format into memory, with the JSON
// metadata under metaKey decoded into meta (when both are given).
func ReadParquet[T any](path string, format FileFormat, metaKey string, meta any) ([]T, error) {
	r, err := OpenParquet[T](path, format)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if metaKey != "" && meta != nil {
		if err := r.Meta(metaKey, meta); err != nil {
			return nil, err
		}
	}
	return readAll(r.pf.NumRows(), r.read)
}

func (r *ParquetReader[T]) read(rows []T) (int, error) {
	n, err := r.r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("reading %s: %w", r.path, err)
	}
	return n, err
}

func (r *ParquetReader[T]) json(key string, v any) error {
	s, ok := r.pf.Lookup(key)
	if !ok {
		return nil
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("%s: decoding %s metadata: %w", r.path, key, err)
	}
	return nil
}

func (r *ParquetReader[T]) close() error {
	r.r.Close()
	return r.f.Close()
}

// TraceReader reads a trace file in row order.
type TraceReader struct {
	r    *ParquetReader[Turn]
	Meta TraceMeta
	rows int64 // rows read so far, for error messages
}

// OpenTrace opens and validates a trace file.
func OpenTrace(path string) (*TraceReader, error) {
	r, err := OpenParquet[Turn](path, TraceFormat)
	if err != nil {
		return nil, err
	}
	tr := &TraceReader{r: r}
	if err := r.json(MetaTrace, &tr.Meta); err != nil {
		r.close()
		return nil, err
	}
	return tr, nil
}

// NumRows is the number of rows in the file.
func (t *TraceReader) NumRows() int64 { return t.r.pf.NumRows() }

// SchemaVersion is the schema version the file is stamped with: the
// oldest that holds every row (TraceSchemaVersion and earlier), so a
// reader learns before reading rows whether any carries media.
func (t *TraceReader) SchemaVersion() int {
	vs, _ := t.r.pf.Lookup(MetaSchemaVersion)
	v, _ := strconv.Atoi(vs) // checked when the file was opened
	return v
}

// Read fills rows and returns how many it read; io.EOF at the end. The
// reader may reuse the slices already in rows: copy a row's lists before
// handing the same rows to Read again. Every row is checked (Turn.Check):
// a bad one ends the read with an error naming its row.
func (t *TraceReader) Read(rows []Turn) (int, error) {
	n, err := t.r.read(rows)
	for i := range rows[:n] {
		if cerr := rows[i].Check(); cerr != nil {
			return i, fmt.Errorf("trace row %d: %w", t.rows+int64(i), invalidTurn{cerr})
		}
	}
	t.rows += int64(n)
	return n, err
}

// Close releases the file.
func (t *TraceReader) Close() error { return t.r.close() }

// RecordReader reads a recording in row order.
type RecordReader struct {
	r    *ParquetReader[recordRow]
	Meta RunMeta
	// layout is how the file holds the event times (gaps.go), which Read
	// turns into run-relative times.
	layout eventLayout
	buf    []recordRow // the rows as read, during a Read
	rows   int64       // rows read so far, for error messages
}

// OpenRecording opens and validates a recording file. It reads the event
// times from whichever of event_gap_us (of DOUBLE, or of INT64 in schema
// 7), event_gap_ns and event_ns the file holds, and refuses a file that
// holds two of them.
func OpenRecording(path string) (*RecordReader, error) {
	var layout eventLayout
	r, err := openParquet[recordRow](path, RecordingFormat, func(s *parquet.Schema) ([]parquet.ReaderOption, error) {
		var err error
		layout, err = eventLayoutOf(s)
		return layout.readerOptions(), err
	})
	if err != nil {
		return nil, err
	}
	rr := &RecordReader{r: r, layout: layout}
	if err := r.json(MetaRun, &rr.Meta); err != nil {
		r.close()
		return nil, err
	}
	return rr, nil
}

// NumRows is the number of rows in the file.
func (t *RecordReader) NumRows() int64 { return t.r.pf.NumRows() }

// Read fills rows and returns how many it read; io.EOF at the end. The
// reader may reuse the slices already in rows: copy a row's lists before
// handing the same rows to Read again. An event_gap_us value that is not
// a whole number of microseconds ends the read with an error naming its
// row.
func (t *RecordReader) Read(rows []Record) (int, error) {
	if cap(t.buf) < len(rows) {
		t.buf = make([]recordRow, len(rows))
	}
	buf := t.buf[:len(rows)]
	n, err := t.r.read(buf)
	defer clear(buf[:n]) // hold no row's lists past the call
	for i := range buf[:n] {
		d := &buf[i]
		if t.layout == eventsGapUs {
			d.EventNs = doubleBits(d.EventGapUs) // the read list's own storage: no other row has it
		}
		if cerr := t.layout.absolute(d.EventNs, d.SentNs); cerr != nil {
			return i, fmt.Errorf("%s: row %d (request %q): %w", t.r.path, t.rows+int64(i), d.RequestID, cerr)
		}
		rows[i] = d.Record
	}
	t.rows += int64(n)
	return n, err
}

// Close releases the file.
func (t *RecordReader) Close() error { return t.r.close() }

// readAll reads every row of a file of rows rows through read into a
// fresh slice (so no row shares list storage with another), a row group's
// rows at a time.
func readAll[T any](rows int64, read func([]T) (int, error)) ([]T, error) {
	out := make([]T, rows)
	for n := 0; n < len(out); {
		k, err := read(out[n:min(len(out), n+RowGroupRows)])
		n += k
		if errors.Is(err, io.EOF) || (err == nil && k == 0) {
			return out[:n], nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w (after row %d)", err, n)
		}
	}
	return out, nil
}

// ReadTurns reads a whole trace into memory, for tests and small files;
// replay streams with OpenTrace instead.
func ReadTurns(path string) ([]Turn, TraceMeta, error) {
	r, err := OpenTrace(path)
	if err != nil {
		return nil, TraceMeta{}, err
	}
	defer r.Close()
	rows, err := readAll(r.r.pf.NumRows(), r.r.read) // unchecked: tests read back any row they wrote
	return rows, r.Meta, err
}

// ReadRecords reads a whole recording into memory, for tests and small
// files; analyze streams with OpenRecording instead.
func ReadRecords(path string) ([]Record, RunMeta, error) {
	r, err := OpenRecording(path)
	if err != nil {
		return nil, RunMeta{}, err
	}
	defer r.Close()
	rows, err := readAll(r.NumRows(), r.Read)
	return rows, r.Meta, err
}

// CompareTurns is the trace's row order: start offset, then conversation
// id, then turn, so a reader streams conversations in start order with each
// conversation's turns contiguous.
func CompareTurns(a, b Turn) int {
	return cmp.Or(cmp.Compare(a.StartOffsetNs, b.StartOffsetNs), strings.Compare(a.ConversationID, b.ConversationID), cmp.Compare(a.Turn, b.Turn))
}

// WriteTrace sorts turns into the trace order (stable, in place) and writes
// them to path.
func WriteTrace(path string, meta TraceMeta, turns []Turn) error {
	slices.SortStableFunc(turns, CompareTurns)
	tw, err := NewTraceWriter(path, meta)
	if err != nil {
		return err
	}
	if err := tw.Write(turns...); err != nil {
		tw.Close()
		return err
	}
	return tw.Close()
}

// SyncDir makes a rename in dir durable; failure only weakens crash safety,
// so it is ignored.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
