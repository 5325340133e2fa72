//go:build linux

package replay

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// backgroundThread locks the calling goroutine to its OS thread and gives
// that thread the lowest scheduling priority (nice 19), so that on a busy
// machine the kernel runs the dispatcher, the read loops and the server
// before it. The goroutine must not unlock it: when it returns, the runtime
// ends the locked thread, and its priority goes with it. Linux sets the
// niceness of one thread by its thread id. Not SCHED_IDLE: a waking
// dispatcher would preempt it sooner, but beside other busy processes it
// gets a fifth of nice 19's share, and a loaded client then falls behind
// making its media (tests with images took twice as long beside two busy
// loops). Best effort: raising one's own niceness needs no privilege, and
// a failure only leaves the thread as it was.
func backgroundThread() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
