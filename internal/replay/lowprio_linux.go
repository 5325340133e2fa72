//go:build linux

package replay

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// backgroundThread locks the calling goroutine to its OS thread and puts
// that thread in the SCHED_IDLE class, so that on a busy machine the
// kernel runs the dispatcher, the read loops and the server before it.
// SCHED_IDLE, not just nice 19: a task waking up preempts a SCHED_IDLE one
// at once, while a nice-19 one may finish its protected slice first, which
// measured as dispatch lag of up to a millisecond beside image encoding.
// Nice 19 is the fallback where the class is refused. The goroutine must
// not unlock it: when it returns, the runtime ends the locked thread, and
// its class goes with it. Linux sets these per thread, by thread id. Best
// effort: lowering one's own priority needs no privilege, and a failure
// only leaves the thread as it was.
func backgroundThread() {
	runtime.LockOSThread()
	tid := unix.Gettid()
	attr := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: unix.SCHED_IDLE}
	if unix.SchedSetAttr(tid, &attr, 0) != nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
	}
}
