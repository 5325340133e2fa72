package record

import (
	"errors"
	"fmt"
	"os"
)

// Discard closes a recorder whose run never started and removes what it
// created (the journal and the partial file), so no recording appears at
// its path and a file already there is left alone. Records submitted before
// it are dropped with the files. It returns the first error met removing
// them; calling it after Close does nothing.
func (r *Recorder) Discard() error {
	r.closeMu.Lock()
	if !r.closed {
		r.discard.Store(true)
		r.closed = true
		close(r.ch)
	}
	r.closeMu.Unlock()
	<-r.done
	return r.Err()
}

// removeAll is finish for a discarded recorder: the writer goroutine closes
// and removes both files.
func (r *Recorder) removeAll() {
	r.jf.Close()
	r.pw.Close()
	for _, p := range []string{partialPath(r.path), r.journal} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.setErr(fmt.Errorf("discarding the recording: %w", err))
		}
	}
}
