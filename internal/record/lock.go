package record

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// An output being written by a long run (a recording, a capture segment's
// trace, their journals) is locked for the life of the run: a second
// process writing the same path would otherwise take the first one's live
// journal for a killed run's and the two would overwrite each other's
// files. The lock is an OS advisory lock on a file beside the output
// (LockPath) holding the owner's pid: it dies with the process, so a run
// killed by SIGKILL leaves no stale lock, and Recover takes the same lock
// before it touches a journal.

// LockPath is where the lock of the output path lives.
func LockPath(path string) string { return path + ".lock" }

// LockedError says that another live process holds the lock of an output.
// It matches fs.ErrExist (errors.Is): for a writer choosing a free name,
// a locked name is a taken one.
type LockedError struct {
	Path string // the output path
	PID  int    // the process holding it, 0 when it could not be read
}

func (e *LockedError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "another tracekit process (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("%s is being written by %s: wait for it to finish or stop it; nothing of its files was touched", e.Path, who)
}

// Is makes a LockedError match fs.ErrExist.
func (e *LockedError) Is(target error) bool { return target == fs.ErrExist }

// OutputLock is a held lock on an output path; Release gives it up.
type OutputLock struct {
	path string
	f    *os.File
}

// LockOutput takes the lock of the output path for this process, or fails
// with a *LockedError naming the process that holds it.
func LockOutput(path string) (*OutputLock, error) {
	lp := LockPath(path)
	for range 10 {
		f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		held, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !held {
			pid := lockOwner(f)
			f.Close()
			return nil, &LockedError{Path: path, PID: pid}
		}
		// The owner before us removes the file before it unlocks: when the
		// name no longer leads to the file we locked, lock the new one.
		st, err1 := f.Stat()
		cur, err2 := os.Stat(lp)
		if err1 != nil || err2 != nil || !os.SameFile(st, cur) {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &OutputLock{path: path, f: f}, nil
	}
	return nil, fmt.Errorf("locking %s: %s keeps being replaced", path, lp)
}

// lockOwner reads the pid the holder wrote into the lock file; a holder
// that has just taken the lock may not have written it yet.
func lockOwner(f *os.File) int {
	buf := make([]byte, 32)
	for range 20 {
		n, _ := f.ReadAt(buf, 0)
		if pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n]))); err == nil && pid > 0 {
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// Release removes the lock file and gives up the lock; nil-safe, and safe
// to call more than once.
func (l *OutputLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(LockPath(l.path)) // while still held: see LockOutput
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	err = errors.Join(err, unlock(l.f), l.f.Close())
	l.f = nil
	return err
}
