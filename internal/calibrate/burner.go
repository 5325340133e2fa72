package calibrate

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// BurnSlice is how long a burner goroutine spins before it yields.
const BurnSlice = 100 * time.Microsecond

// burner keeps n goroutines of this process busy: each spins for slice,
// yields (runtime.Gosched) and spins again, until Stop. It stands for a
// client that is busy with CPU work between its reads (encoding requests,
// its own GC): the read goroutines must wait for a P behind the spinners,
// so a stamp taken when a goroutine runs is late, while a kernel stamp is
// not. It runs inside the client process on purpose (a child process
// would compete only at the OS level, which the mock child already does);
// its CPU counts in the step's client cores.
type burner struct {
	stop  atomic.Bool
	wg    sync.WaitGroup
	spins atomic.Int64
}

// startBurner starts n spinning goroutines; Stop ends them.
func startBurner(n int, slice time.Duration) *burner {
	b := &burner{}
	for range n {
		b.wg.Go(func() {
			var x uint64
			for !b.stop.Load() {
				end := time.Now().Add(slice)
				for time.Now().Before(end) {
					for range 64 { // work between clock reads
						x = x*6364136223846793005 + 1442695040888963407
					}
				}
				b.spins.Add(1)
				runtime.Gosched()
			}
			sink.Store(x)
		})
	}
	return b
}

// sink keeps the burner's arithmetic from being optimized away.
var sink atomic.Uint64

// Stop ends the burner and waits for its goroutines; it returns how many
// slices they spun.
func (b *burner) Stop() int64 {
	b.stop.Store(true)
	b.wg.Wait()
	return b.spins.Load()
}
