package record

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/redact"
	"github.com/tracekit/tracekit/trace"
)

// RecorderOptions tune a Recorder; the zero value is usable.
type RecorderOptions struct {
	// Queue is the capacity of the hand-off channel. Size it to the
	// concurrency: each in-flight request then finds room for its record
	// and Submit only waits when the disk falls a whole concurrency behind.
	// Default 1024.
	Queue int
	// SyncEvery is how often the journal is flushed and fsync'd: the most
	// a SIGKILL can lose. Default 1 s.
	SyncEvery time.Duration
	// Journal is the journal's path. Default JournalPath(path).
	Journal string
	// NoReplace refuses to start when path or its journal's path is taken
	// and, at Close, never renames over a file that appeared at path
	// meanwhile (the finished recording then stays at its partial path and
	// Close says where). Without it an existing file at path is replaced.
	NoReplace bool
	// Lock is the lock on path (LockOutput) when the caller took it
	// itself, to hold it longer than the Recorder (a command that checks
	// and writes other files beside the recording); the Recorder then
	// neither takes nor releases one. Without it NewRecorder takes the
	// lock and Close releases it.
	Lock *OutputLock
	// Scrub cleans each record's error message of the run's secrets (a
	// server may echo the key it was sent) before it is written; nil still
	// removes Bearer tokens.
	Scrub *redact.Scrubber
	// Tap, when set, sees each record once it is written, on the writer
	// goroutine (never a request's): a live view's feed. It must not wait
	// and must not keep rec or its slices.
	Tap func(rec *trace.Record)
}

// JournalPath is where a Recorder writing path keeps its journal.
func JournalPath(path string) string { return path + ".journal" }

// partialPath is where the Parquet file is built until Close renames it.
func partialPath(path string) string { return path + ".partial" }

// RecorderStats counts what went through a Recorder.
type RecorderStats struct {
	Submitted int64 // records handed to Submit
	Written   int64 // records written by the writer goroutine
	Stalls    int64 // Submits that found the queue full and waited
	Dropped   int64 // Submits after Close, not recorded
}

// Recorder owns one recording file. Request goroutines Submit finished
// records; one writer goroutine appends each to the journal (fsync'd every
// SyncEvery) and to the Parquet file (row groups flushed every
// trace.RowGroupRows rows, so memory stays bounded). Close drains the
// queue, writes the Parquet footer, renames the file into place and
// removes the journal. After a crash, Recover turns the journal into the
// recording.
type Recorder struct {
	path, journal string
	opts          RecorderOptions
	recovered     *RecoverResult
	lock          *OutputLock // taken by NewRecorder, released when the writer ends; nil when the caller holds it

	ch   chan *trace.Record
	pool sync.Pool // *trace.Record copies, recycled by the writer

	closeMu sync.RWMutex // Submit holds it shared; Close exclusively
	closed  bool
	done    chan struct{} // closed when the writer goroutine exits

	metaMu    sync.Mutex
	meta      trace.RunMeta
	metaDirty bool

	errMu sync.Mutex
	err   error

	submitted, written, stalls, dropped atomic.Int64
	discard                             atomic.Bool // Discard: remove the files instead of finishing

	// Owned by the writer goroutine.
	jf      *os.File
	jw      *bufio.Writer
	pw      *trace.RecordWriter
	frame   []byte
	payload []byte
	held    []*trace.Record // pooled copies behind batch, returned after writing
	batch   []trace.Record
}

// NewRecorder locks path (LockOutput: a path another live process writes
// fails with a *LockedError), creates the journal and the partial Parquet
// file for path and starts the writer goroutine.
func NewRecorder(path string, meta trace.RunMeta, opts RecorderOptions) (r *Recorder, err error) {
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.SyncEvery <= 0 {
		opts.SyncEvery = time.Second
	}
	if opts.Journal == "" {
		opts.Journal = JournalPath(path)
	}
	var lock *OutputLock
	if opts.Lock == nil {
		if lock, err = LockOutput(path); err != nil {
			return nil, fmt.Errorf("creating recording: %w", err)
		}
		defer func() {
			if err != nil {
				lock.Release()
			}
		}()
	}
	r = &Recorder{
		path: path, journal: opts.Journal, opts: opts, meta: meta, lock: lock,
		ch:   make(chan *trace.Record, opts.Queue),
		done: make(chan struct{}),
	}
	r.pool.New = func() any { return new(trace.Record) }
	if opts.NoReplace {
		for _, p := range []string{path, opts.Journal, partialPath(path)} {
			if _, err := os.Lstat(p); err == nil {
				return nil, fmt.Errorf("creating recording %s: %s already exists and is never replaced (a journal left by a killed run: 'tracekit recover' it): %w", path, p, fs.ErrExist)
			}
		}
	}
	if err := r.recoverLeftover(); err != nil {
		return nil, err
	}
	if err := r.open(meta); err != nil {
		return nil, err
	}
	go r.run()
	return r, nil
}

// recoverLeftover finalizes the journal a killed earlier run left at our
// journal path, so starting again never destroys it. The old records go to
// a ".recovered-<unix>" file next to path.
func (r *Recorder) recoverLeftover() error {
	if _, err := os.Stat(r.journal); err != nil {
		return nil
	}
	ext := filepath.Ext(r.path)
	out := fmt.Sprintf("%s.recovered-%d%s", strings.TrimSuffix(r.path, ext), time.Now().Unix(), ext)
	res, err := recoverJournal(r.journal, out)
	if err != nil {
		return fmt.Errorf("a killed earlier run left %s and recovering it failed (move it away or run 'tracekit recover'): %w", r.journal, err)
	}
	r.recovered = &res
	return nil
}

// Recovered describes the leftover journal of a killed earlier run that
// NewRecorder turned into a recording before starting, or nil.
func (r *Recorder) Recovered() *RecoverResult { return r.recovered }

func (r *Recorder) open(meta trace.RunMeta) error {
	flags := os.O_CREATE | os.O_TRUNC | os.O_WRONLY
	if r.opts.NoReplace {
		flags = os.O_CREATE | os.O_EXCL | os.O_WRONLY // another writer may have taken the name since the check
	}
	jf, err := os.OpenFile(r.journal, flags, 0o644)
	if err != nil {
		return fmt.Errorf("creating journal: %w", err)
	}
	payload, err := trace.AppendRunMetaPayload(nil, meta)
	if err != nil {
		jf.Close()
		return err
	}
	head := trace.AppendJournalFrame([]byte(trace.JournalMagic), payload)
	if _, err := jf.Write(head); err != nil {
		jf.Close()
		return fmt.Errorf("writing journal %s: %w", r.journal, err)
	}
	if err := jf.Sync(); err != nil {
		jf.Close()
		return fmt.Errorf("syncing journal %s: %w", r.journal, err)
	}
	pw, err := trace.NewRecordWriter(partialPath(r.path), meta)
	if err != nil {
		jf.Close()
		os.Remove(r.journal)
		return fmt.Errorf("creating recording: %w", err)
	}
	r.jf, r.jw, r.pw = jf, bufio.NewWriterSize(jf, 1<<16), pw
	return nil
}

// Submit hands rec to the writer. It copies what it needs, so the caller may
// reuse rec and its slices as soon as it returns. It waits only when the
// queue is full. After Close it drops the record (counted in Stats).
func (r *Recorder) Submit(rec *trace.Record) {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		r.dropped.Add(1)
		return
	}
	c := r.pool.Get().(*trace.Record)
	ev, tok := c.EventNs, c.EventTokens
	*c = *rec
	c.EventNs = append(ev[:0], rec.EventNs...)
	c.EventTokens = append(tok[:0], rec.EventTokens...)
	c.ErrorMessage = r.opts.Scrub.Scrub(c.ErrorMessage)
	r.submitted.Add(1)
	select {
	case r.ch <- c:
	default:
		r.stalls.Add(1)
		r.ch <- c
	}
}

// SetRunMeta replaces the run metadata (e.g. Health, known only at the end).
// It reaches the journal at the next sync and the file on Close.
func (r *Recorder) SetRunMeta(meta trace.RunMeta) {
	r.metaMu.Lock()
	r.meta, r.metaDirty = meta, true
	r.metaMu.Unlock()
}

// Stats returns the counters so far.
func (r *Recorder) Stats() RecorderStats {
	return RecorderStats{
		Submitted: r.submitted.Load(), Written: r.written.Load(),
		Stalls: r.stalls.Load(), Dropped: r.dropped.Load(),
	}
}

// Err returns the first write error, if any; the writer keeps draining the
// queue after an error so Submit never blocks for good.
func (r *Recorder) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

func (r *Recorder) setErr(err error) {
	if err == nil {
		return
	}
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
}

// Path is the recording's final path.
func (r *Recorder) Path() string { return r.path }

// Close stops accepting records, drains the queue, finishes the Parquet file
// at its path and removes the journal. If finishing fails the journal is
// kept and the error says so; Close is safe to call more than once.
func (r *Recorder) Close() error {
	r.closeMu.Lock()
	if !r.closed {
		r.closed = true
		close(r.ch)
	}
	r.closeMu.Unlock()
	<-r.done
	return r.Err()
}

// run is the writer goroutine: the only one touching the files.
func (r *Recorder) run() {
	defer close(r.done)
	defer r.lock.Release()
	tick := time.NewTicker(r.opts.SyncEvery)
	defer tick.Stop()
	for {
		select {
		case c, ok := <-r.ch:
			if !ok {
				r.finish()
				return
			}
			r.collect(c)
			r.writeBatch()
		case <-tick.C:
			r.sync()
		}
	}
}

// collect gathers c and whatever else is queued, up to a batch, so Parquet
// receives rows in groups.
func (r *Recorder) collect(c *trace.Record) {
	r.held = append(r.held[:0], c)
	for len(r.held) < 256 {
		select {
		case c, ok := <-r.ch:
			if !ok {
				return // run sees the close on its next receive
			}
			r.held = append(r.held, c)
		default:
			return
		}
	}
}

// writeBatch appends the held records to the journal and the Parquet file,
// then returns them to the pool (trace.RecordWriter has copied the values
// by then, so a Submit may reuse their slices).
func (r *Recorder) writeBatch() {
	defer func() {
		for i, c := range r.held {
			r.pool.Put(c)
			r.held[i] = nil
		}
		r.held = r.held[:0]
	}()
	if r.Err() != nil {
		return // drained, not written: Err reports why
	}
	r.batch = r.batch[:0]
	for _, c := range r.held {
		r.payload = trace.AppendRecordPayload(r.payload[:0], c)
		r.frame = trace.AppendJournalFrame(r.frame[:0], r.payload)
		if _, err := r.jw.Write(r.frame); err != nil {
			r.setErr(fmt.Errorf("writing journal %s: %w", r.journal, err))
			return
		}
		r.batch = append(r.batch, *c)
	}
	if err := r.pw.Write(r.batch...); err != nil {
		r.setErr(fmt.Errorf("writing recording: %w", err))
		return
	}
	clear(r.batch) // drop references to pooled slices
	r.written.Add(int64(len(r.held)))
	if r.opts.Tap != nil {
		for _, c := range r.held {
			r.opts.Tap(c)
		}
	}
}

// sync makes the journal durable, with the latest run meta.
func (r *Recorder) sync() {
	if r.Err() != nil {
		return
	}
	r.metaMu.Lock()
	meta, dirty := r.meta, r.metaDirty
	r.metaDirty = false
	r.metaMu.Unlock()
	if dirty {
		payload, err := trace.AppendRunMetaPayload(nil, meta)
		if err != nil {
			r.setErr(err)
			return
		}
		if _, err := r.jw.Write(trace.AppendJournalFrame(nil, payload)); err != nil {
			r.setErr(fmt.Errorf("writing journal %s: %w", r.journal, err))
			return
		}
		if err := r.pw.SetRunMeta(meta); err != nil {
			r.setErr(err)
			return
		}
	}
	if err := r.jw.Flush(); err != nil {
		r.setErr(fmt.Errorf("writing journal %s: %w", r.journal, err))
		return
	}
	if err := r.jf.Sync(); err != nil {
		r.setErr(fmt.Errorf("syncing journal %s: %w", r.journal, err))
	}
}

// finish ends the run: journal durable, Parquet closed and renamed into
// place, journal removed.
func (r *Recorder) finish() {
	if r.discard.Load() {
		r.removeAll()
		return
	}
	r.sync()
	jerr := r.jf.Close()
	if err := r.Err(); err != nil {
		r.pw.Close()
		r.setErr(fmt.Errorf("%w (the journal %s holds every record written; run 'tracekit recover %s')", err, r.journal, r.journal))
		return
	}
	if err := r.pw.Close(); err != nil {
		r.setErr(fmt.Errorf("%w (run 'tracekit recover %s')", err, r.journal))
		return
	}
	rename := os.Rename
	if r.opts.NoReplace {
		rename = RenameNoReplace
	}
	if err := rename(partialPath(r.path), r.path); err != nil {
		r.setErr(fmt.Errorf("moving the recording into place (it is complete at %s; the journal %s is kept): %w", partialPath(r.path), r.journal, err))
		return
	}
	trace.SyncDir(filepath.Dir(r.path))
	if jerr != nil && !errors.Is(jerr, os.ErrClosed) {
		r.setErr(fmt.Errorf("closing journal %s: %w", r.journal, jerr))
		return
	}
	if err := os.Remove(r.journal); err != nil {
		r.setErr(fmt.Errorf("removing journal: %w", err))
	}
}
