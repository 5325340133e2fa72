package sweep

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/tracekit/tracekit/trace"
)

// WriteFileAtomic writes path through a temporary file in its directory,
// synced and renamed into place, so a reader never sees half a file and a
// failed write leaves the previous one. The file gets the mode os.Create
// gives.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := createTemp(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	trace.SyncDir(dir)
	return nil
}

// createTemp creates a new temporary file beside path with the mode
// os.Create gives (0666 less the umask), which the renamed file keeps:
// os.CreateTemp's 0600 would hide a sweep's files from the other users
// who read its recordings.
func createTemp(path string) (*os.File, error) {
	for try := 0; ; try++ {
		tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.tmp-%d-%x", filepath.Base(path), os.Getpid(), rand.Uint64()))
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 10 {
			return f, err
		}
	}
}
