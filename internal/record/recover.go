package record

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tracekit/tracekit/trace"
)

// RecoverResult says what Recover saved from one journal.
type RecoverResult struct {
	Journal string
	Out     string
	Records int  // records, or turns for a trace
	Trace   bool // a capture segment's trace journal, not a recording's
	// TornBytes is the size of the partial frame a crash left at the end of
	// the journal (dropped).
	TornBytes int64
	// MediaItems and MediaBytes are what a trace journal held of real
	// media items, stored in the media file beside the trace.
	MediaItems int
	MediaBytes int64
}

// Recover turns what a killed run left into valid recordings and returns how
// many records it saved. journalOrDir may be a journal, the recording path
// the run was writing (its journal is found next to it), or a directory, in
// which case every *.journal in it is recovered to its own name without
// ".journal" and outPath must be empty. outPath "" means the journal's name
// without ".journal". The journal and the partial Parquet file are removed
// once the recording is in place.
func Recover(journalOrDir, outPath string) (n int, err error) {
	res, err := RecoverAll(journalOrDir, outPath)
	for _, r := range res {
		n += r.Records
	}
	return n, err
}

// RecoverAll is Recover with a result per journal.
func RecoverAll(journalOrDir, outPath string) ([]RecoverResult, error) {
	// A recording path whose journal sits next to it means that journal.
	if !strings.HasSuffix(journalOrDir, ".journal") {
		if _, err := os.Stat(JournalPath(journalOrDir)); err == nil {
			journalOrDir = JournalPath(journalOrDir)
		}
	}
	st, err := os.Stat(journalOrDir)
	if err != nil {
		return nil, fmt.Errorf("recovering: %w", err)
	}
	if !st.IsDir() {
		r, err := recoverUnlocked(journalOrDir, outPath)
		if err != nil {
			return nil, err
		}
		return []RecoverResult{r}, nil
	}
	if outPath != "" {
		return nil, fmt.Errorf("recovering directory %s: an output path only applies to a single journal", journalOrDir)
	}
	journals, err := filepath.Glob(filepath.Join(journalOrDir, "*.journal"))
	if err != nil {
		return nil, fmt.Errorf("listing journals in %s: %w", journalOrDir, err)
	}
	if len(journals) == 0 {
		return nil, fmt.Errorf("recovering %s: no *.journal file in the directory", journalOrDir)
	}
	var out []RecoverResult
	var live []error // journals of runs still going: left alone, the others recovered
	for _, j := range journals {
		r, err := recoverUnlocked(j, "")
		var le *LockedError
		if errors.As(err, &le) {
			live = append(live, err)
			continue
		}
		if err != nil {
			return out, errors.Join(append(live, err)...)
		}
		out = append(out, r)
	}
	return out, errors.Join(live...)
}

// recoverUnlocked recovers a journal whose run is over: it takes the lock
// of the run's output first, so the live journal of a run still writing is
// never touched (a *LockedError names its process). A lock file a killed
// run left goes with the journal.
func recoverUnlocked(journal, outPath string) (RecoverResult, error) {
	if run, ok := strings.CutSuffix(journal, ".journal"); ok {
		lock, err := LockOutput(run)
		if err != nil {
			return RecoverResult{Journal: journal}, fmt.Errorf("recovering %s: %w", journal, err)
		}
		defer lock.Release()
	}
	return recoverJournal(journal, outPath)
}

// recoverJournal does the recovery; the caller holds the run's lock.
func recoverJournal(journal, outPath string) (RecoverResult, error) {
	if outPath == "" {
		outPath = strings.TrimSuffix(journal, ".journal")
		if outPath == journal {
			return RecoverResult{}, fmt.Errorf("recovering %s: the name does not end in .journal and no journal was found next to it: %w", journal, trace.ErrNotJournal)
		}
	}
	res := RecoverResult{Journal: journal, Out: outPath}
	f, err := os.Open(journal)
	if err != nil {
		return res, fmt.Errorf("recovering: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	if trace.SniffJournal(br) == trace.TraceJournalMagic {
		return recoverTraceJournal(br, journal, outPath)
	}
	jr, err := trace.NewJournalReader(br, journal, trace.JournalMagic)
	if err != nil {
		return res, err
	}
	tmp := outPath + ".recovering"
	var rec trace.Record
	var w *trace.RecordWriter
	for {
		err := jr.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if w != nil {
				w.Close()
				os.Remove(tmp)
			}
			return res, fmt.Errorf("recovering: %w", err)
		}
		if w == nil { // the first meta frame precedes every record
			if w, err = trace.NewRecordWriter(tmp, jr.Meta); err != nil {
				return res, fmt.Errorf("recovering %s: %w", journal, err)
			}
		}
		if err := w.Write(rec); err != nil {
			w.Close()
			os.Remove(tmp)
			return res, fmt.Errorf("recovering %s: %w", journal, err)
		}
		res.Records++
	}
	if w == nil {
		if w, err = trace.NewRecordWriter(tmp, jr.Meta); err != nil {
			return res, fmt.Errorf("recovering %s: %w", journal, err)
		}
	}
	if err := w.SetRunMeta(jr.Meta); err != nil { // the latest meta frame wins
		w.Close()
		os.Remove(tmp)
		return res, fmt.Errorf("recovering %s: %w", journal, err)
	}
	if err := w.Close(); err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("recovering %s: %w", journal, err)
	}
	res.TornBytes = tornBytes(jr, journal)
	if res.Out, err = moveToFreeName(tmp, outPath); err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("recovering %s: moving the recording into place: %w", journal, err)
	}
	outPath = res.Out
	trace.SyncDir(filepath.Dir(outPath))
	os.Remove(partialPath(strings.TrimSuffix(journal, ".journal")))
	if err := os.Remove(journal); err != nil {
		return res, fmt.Errorf("recovered %d records into %s but could not remove the journal: %w", res.Records, outPath, err)
	}
	return res, nil
}

// holdsAll reports whether the media file at path holds every item of
// hashes.
func holdsAll(path string, hashes []string) bool {
	s, err := trace.OpenMediaFile(path)
	if err != nil {
		return false
	}
	defer s.Close()
	for _, h := range hashes {
		if _, ok := s.Has(h); !ok {
			return false
		}
	}
	return true
}

// moveToFreeName renames tmp to want, or, when a file is already there
// (the run finished it before dying, or an earlier recovery did), to the
// first free "<name>.recovered[-k]<ext>" next to it: recovery never replaces
// a file. It returns the name used.
func moveToFreeName(tmp, want string) (string, error) {
	ext := filepath.Ext(want)
	stem := strings.TrimSuffix(want, ext)
	name := want
	for k := 1; k <= 1000; k++ {
		err := RenameNoReplace(tmp, name)
		if !errors.Is(err, fs.ErrExist) {
			return name, err
		}
		name = fmt.Sprintf("%s.recovered%s", stem, ext)
		if k > 1 {
			name = fmt.Sprintf("%s.recovered-%d%s", stem, k, ext)
		}
	}
	return "", fmt.Errorf("%s and 1000 recovered names next to it exist: %w", want, fs.ErrExist)
}

// tornBytes is how much of the journal's tail was dropped.
func tornBytes(jr *trace.JournalReader, journal string) int64 {
	if !jr.Torn {
		return 0
	}
	st, err := os.Stat(journal)
	if err != nil {
		return 0
	}
	return st.Size() - jr.TornOffset
}

// recoverTraceJournal writes the turns of a capture segment's trace
// journal, sorted, as a trace.
func recoverTraceJournal(r io.Reader, journal, outPath string) (RecoverResult, error) {
	res := RecoverResult{Journal: journal, Out: outPath, Trace: true}
	jr, err := trace.NewJournalReader(r, journal, trace.TraceJournalMagic)
	if err != nil {
		return res, err
	}
	tmp := outPath + ".recovering"
	// The segment's real media items go to a media file beside the trace
	// (the one the killed capture was writing is not a valid file).
	var mw *trace.MediaWriter
	var hashes []string
	abort := func() {
		os.Remove(tmp)
		if mw != nil {
			mw.Abort()
			os.Remove(trace.MediaPath(tmp))
		}
	}
	turns, meta, err := jr.ReadTraceJournal(func(m trace.Media, data []byte) error {
		if mw == nil {
			var err error
			if mw, err = trace.NewMediaWriter(trace.MediaPath(tmp), true); err != nil {
				return err
			}
		}
		hashes = append(hashes, m.Hash)
		_, err := mw.Put(m, data)
		return err
	})
	if err != nil {
		abort()
		return res, fmt.Errorf("recovering: %w", err)
	}
	if mw != nil {
		if err := mw.Close(); err != nil {
			abort()
			return res, fmt.Errorf("recovering %s: the media file: %w", journal, err)
		}
	}
	if err := trace.WriteTrace(tmp, meta, turns); err != nil {
		abort()
		return res, fmt.Errorf("recovering %s: %w", journal, err)
	}
	if res.Out, err = moveToFreeName(tmp, outPath); err != nil {
		abort()
		return res, fmt.Errorf("recovering %s: moving the trace into place: %w", journal, err)
	}
	outPath = res.Out
	if mw != nil {
		err := RenameNoReplace(trace.MediaPath(tmp), trace.MediaPath(outPath))
		if errors.Is(err, fs.ErrExist) && holdsAll(trace.MediaPath(outPath), hashes) {
			// The capture put its media file in place before it died.
			err = os.Remove(trace.MediaPath(tmp))
		}
		if err != nil {
			os.Remove(trace.MediaPath(tmp))
			return res, fmt.Errorf("recovered %d turns into %s but not their media file (the journal is kept): %w", len(turns), outPath, err)
		}
		res.MediaItems, res.MediaBytes = mw.Items(), mw.Bytes()
	}
	// What the killed capture left of its own media file.
	os.Remove(trace.MediaTempPath(trace.MediaPath(strings.TrimSuffix(journal, ".journal"))))
	trace.SyncDir(filepath.Dir(outPath))
	res.Records, res.TornBytes = len(turns), tornBytes(jr, journal)
	if err := os.Remove(journal); err != nil {
		return res, fmt.Errorf("recovered %d turns into %s but could not remove the journal: %w", res.Records, outPath, err)
	}
	return res, nil
}
