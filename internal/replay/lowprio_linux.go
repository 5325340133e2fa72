//go:build linux

package replay

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// schedIdle is Linux's SCHED_IDLE policy (sched.h).
const schedIdle = 5

// backgroundThread locks the calling goroutine to its OS thread and gives
// that thread the lowest priority, so that on a busy machine the kernel
// runs the dispatcher, the read loops and the server before it. The
// goroutine must not unlock it: when it returns, the runtime ends the
// locked thread, and its priority goes with it. Linux sets the priority
// of one thread by its thread id. Best effort: lowering one's own priority
// needs no privilege, and a failure only leaves the thread as it was.
//
// The thread is at nice 19, and with idle in the idle class (SCHED_IDLE)
// too, which the kernel is meant to preempt at once for a waking thread of
// the normal class, where a nice 19 one may keep the CPU to the end of its
// time slice. Measured, neither is enough on its own: a text replay pinned
// to one CPU beside a busy loop on it had dispatch lag p99s from 0.03 to
// 3.4 ms across runs, at either class, on a 2-vCPU VM (kernel preemption
// "none", 250 Hz), and the process's own nice-19 media workers held that
// CPU for tens of milliseconds while its woken threads waited (perf
// sched). So the workers also sleep while a request is due (mediaGate).
// Beside other busy processes the idle class gets a fifth of nice 19's
// share, and a loaded client fell behind making its media (tests with
// images took twice as long beside two busy loops): the look-ahead asks
// for it only when it is well ahead.
func backgroundThread(idle bool) {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
	if idle {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedIdle, Nice: 19}
		_ = unix.SchedSetAttr(0, &attr, 0)
	}
}
