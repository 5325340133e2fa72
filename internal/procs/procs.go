package procs

import (
	"runtime"
	"sync"
)

var (
	mu    sync.Mutex
	base  int // GOMAXPROCS before the first reservation
	extra int // Ps reserved now
)

// Reserve raises GOMAXPROCS by n for as long as the returned release is
// not called; release is idempotent. Reservations add up; the last
// release puts GOMAXPROCS back to what it was before the first. Each
// change stops the world for a moment: reserve per run, not per request.
func Reserve(n int) (release func()) {
	if n <= 0 {
		return func() {}
	}
	mu.Lock()
	if extra == 0 {
		base = runtime.GOMAXPROCS(0)
	}
	extra += n
	runtime.GOMAXPROCS(base + extra)
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			extra -= n
			runtime.GOMAXPROCS(base + extra)
			mu.Unlock()
		})
	}
}

// Base is GOMAXPROCS less the Ps reserved now: what the process had for
// its ordinary goroutines.
func Base() int {
	mu.Lock()
	defer mu.Unlock()
	if extra == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return base
}
