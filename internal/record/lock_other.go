//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package record

import (
	"os"
	"sync"
)

// Without flock the lock is held within this process only (a set of open
// lock files): two runs in one process exclude each other, two processes
// rely on the writers' own checks for existing files.
var (
	heldMu sync.Mutex
	held   = map[string]bool{}
)

func tryLock(f *os.File) (bool, error) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[f.Name()] {
		return false, nil
	}
	held[f.Name()] = true
	return true, nil
}

func unlock(f *os.File) error {
	heldMu.Lock()
	delete(held, f.Name())
	heldMu.Unlock()
	return nil
}
