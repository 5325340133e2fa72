package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// segment is one pair of output files: the requests that arrived while it
// was current. Its recording is written as records come (crash-safe through
// the record.Recorder's journal); its trace is written when it closes, because a
// trace's rows are sorted by conversation start with each conversation's
// turns together. It closes once rotated and its last request has ended.
type segment struct {
	n           int
	origin      int64 // mono ns of the first arrival: time 0 of both files
	meta        trace.RunMeta
	recOpts     record.RecorderOptions
	open        sync.Once // creates rec off the request path
	rec         *record.Recorder
	openErr     error
	base        string // path prefix the files' names start from
	tracePath   string // set when the files are created (a free name)
	recPath     string
	logf        func(format string, args ...any)
	rotateAt    int64
	rotateBytes int64
	inflight    sync.WaitGroup
	mu          sync.Mutex
	turns       []trace.Turn
	bytes       int64
	requests    int

	traceMeta trace.TraceMeta
	syncFile  func(*os.File) error // nil: (*os.File).Sync
	traceLock *record.OutputLock   // held from openTraceJournal until the trace is in place or given up

	// The trace journal: each finished turn is written to the file as it
	// is accounted (one write, no buffer kept in the process), so a
	// SIGKILL loses no accounted turn whatever fsync does; syncTrace
	// fsyncs it every SyncEvery, for a machine that goes down. Under jmu,
	// which arrivals never take.
	jmu        sync.Mutex
	tj         *os.File
	tjErr      error
	tjReported bool
	payload    []byte
	frame      []byte

	// media stores the real media items' bytes (media.go), opened on the
	// first; used by the accounting worker, then by close.
	media    mediaWriter
	mediaErr error
}

// maxNameTries bounds the "-k" suffixes tried for a free file name.
const maxNameTries = 100

// recorder creates the segment's files on first use (file creation and an
// fsync: kept off the request path). They take the first free name among
// base, base-2, base-3...: an earlier run's files in the directory (a run
// started in the same second, or journals a killed run left) are never
// replaced.
func (s *segment) recorder() (*record.Recorder, error) {
	s.open.Do(func() {
		for k := 1; k <= maxNameTries; k++ {
			base := s.base
			if k > 1 {
				base = fmt.Sprintf("%s-%d", s.base, k)
			}
			s.tracePath, s.recPath = base+".trace.parquet", base+".recording.parquet"
			err := s.openTraceJournal()
			if err == nil {
				opts := s.recOpts
				opts.NoReplace = true
				if s.rec, err = record.NewRecorder(s.recPath, s.meta, opts); err != nil {
					s.dropTraceJournal()
				}
			}
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				s.openErr = fmt.Errorf("opening segment %d: %w", s.n, err)
			} else if k > 1 {
				s.logf("capture: files named %s* already exist in %s (an earlier run's); segment %d is written as %s* instead",
					filepath.Base(s.base), filepath.Dir(s.base), s.n, filepath.Base(base))
			}
			return
		}
		s.openErr = fmt.Errorf("opening segment %d: %s and %d suffixed names are all taken: %w", s.n, s.base, maxNameTries-1, fs.ErrExist)
	})
	return s.rec, s.openErr
}

// openTraceJournal reserves the segment's names and starts the crash-safe
// copy of its trace. The trace's path is locked (record.LockOutput, as the
// recording's is by its Recorder) and the journal created exclusively,
// after checking that no other file of the pair exists: it is the
// reservation, so two processes writing into one directory never share a
// name, and recover leaves the journal alone while this process lives. An
// error wrapping fs.ErrExist means the name is taken.
func (s *segment) openTraceJournal() (err error) {
	path := record.JournalPath(s.tracePath)
	lock, err := record.LockOutput(s.tracePath)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			lock.Release()
		}
	}()
	for _, p := range []string{s.tracePath, s.tracePath + partialSuffix, trace.MediaPath(s.tracePath), s.recPath, record.JournalPath(s.recPath), s.recPath + partialSuffix} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: %w", p, fs.ErrExist)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("creating trace journal: %w", err)
	}
	payload, err := trace.AppendJSONPayload(nil, trace.FrameTraceMeta, s.traceMeta)
	if err == nil {
		_, err = f.Write(trace.AppendJournalFrame([]byte(trace.TraceJournalMagic), payload))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("writing trace journal %s: %w", path, err)
	}
	s.jmu.Lock()
	s.tj, s.traceLock = f, lock
	s.jmu.Unlock()
	return nil
}

// dropTraceJournal undoes openTraceJournal (the recording's name was taken).
func (s *segment) dropTraceJournal() {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.tj != nil {
		s.tj.Close()
		os.Remove(s.tj.Name())
		s.tj = nil
	}
	s.traceLock.Release()
	s.traceLock = nil
}

// partialSuffix names a file being written until it is complete and renamed.
const partialSuffix = ".partial"

// addTurn keeps a finished turn and writes it to the trace journal's file.
// The write is outside mu: an arrival (segmentFor asks due) never waits
// on the disk.
func (s *segment) addTurn(t *trace.Turn, bytes int64) {
	s.mu.Lock()
	s.turns = append(s.turns, *t)
	s.bytes += bytes
	s.requests++
	s.mu.Unlock()

	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.tj == nil || s.tjErr != nil {
		return
	}
	payload, err := trace.AppendJSONPayload(s.payload[:0], trace.FrameTurn, t)
	if err == nil {
		s.payload = payload
		s.frame = trace.AppendJournalFrame(s.frame[:0], payload)
		_, err = s.tj.Write(s.frame)
	}
	s.tjErr = err
}

// journalMedia writes a real media item's bytes to the trace journal, the
// first time the segment stores its content, before the turn that carries
// it: a segment killed before its media file is complete recovers them.
func (s *segment) journalMedia(m trace.Media, data []byte) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.tj == nil || s.tjErr != nil {
		return
	}
	s.tjErr = trace.WriteMediaFrame(s.tj, m, data)
}

// syncTrace makes the trace journal durable (called every SyncEvery). It
// returns a journal failure once; the trace is still written at close.
// The fsync holds no lock: the accounting (addTurn) keeps writing turns
// while a slow disk syncs.
func (s *segment) syncTrace() error {
	s.jmu.Lock()
	if s.tj == nil || s.tjReported {
		s.jmu.Unlock()
		return nil
	}
	err, f := s.tjErr, s.tj
	s.jmu.Unlock()
	if err == nil {
		if s.syncFile != nil {
			err = s.syncFile(f)
		} else {
			err = f.Sync()
		}
	}
	if err != nil {
		s.jmu.Lock()
		if s.tjErr == nil {
			s.tjErr = err
		}
		s.tjReported = true
		s.jmu.Unlock()
	}
	return err
}

func (s *segment) due(now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now >= s.rotateAt || s.bytes >= s.rotateBytes
}

// close finishes the recording and writes the trace (sorted) into a
// partial file renamed into place once complete; the trace journal, made
// durable first, is removed only then.
func (s *segment) close() error {
	rec, err := s.recorder()
	if err != nil {
		return err // nothing was recorded in this segment
	}
	defer s.traceLock.Release() // the journal, when kept, is recover's from here on
	recErr := rec.Close()
	if s.media != nil {
		// in place before the trace: a trace in place has its media
		if err := s.media.Close(); err != nil {
			recErr = errors.Join(fmt.Errorf("segment %d: writing the media file: %w", s.n, err), recErr)
		}
	}
	if err := s.syncTrace(); err != nil {
		s.logf("capture: segment %d: trace journal: %v", s.n, err)
	}
	tmp := s.tracePath + partialSuffix
	if err := trace.WriteTrace(tmp, s.traceMeta, s.turns); err != nil {
		os.Remove(tmp)
		return errors.Join(fmt.Errorf("segment %d: writing the trace (its journal %s is kept: 'tracekit recover' it): %w", s.n, s.tj.Name(), err), recErr)
	}
	if err := record.RenameNoReplace(tmp, s.tracePath); err != nil {
		return errors.Join(fmt.Errorf("segment %d: moving the trace into place (it is complete at %s): %w", s.n, tmp, err), recErr)
	}
	trace.SyncDir(filepath.Dir(s.tracePath))
	s.tj.Close()
	if err := os.Remove(s.tj.Name()); err != nil {
		return errors.Join(fmt.Errorf("segment %d: %w", s.n, err), recErr)
	}
	if recErr != nil {
		return fmt.Errorf("segment %d: %w", s.n, recErr)
	}
	return nil
}
