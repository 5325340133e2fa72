// Package procs adds Ps (GOMAXPROCS) to the process for goroutines that
// hold theirs for long: one blocked in a system call it returns from at
// once when woken (the stamped sockets' poller in epoll_wait), or one that
// grinds for tens of milliseconds without a chance to be preempted sooner
// (an image encoder). In flows a count of such goroutines, Reserve; out
// comes GOMAXPROCS raised by it until the matching release. Their number
// is then not taken from the Ps the dispatcher and the read loops run on,
// which would otherwise wait for the runtime's monitor to take a P back
// (up to 10 ms when it has been idle) or for the encoder's preemption.
// Their threads compete for the CPUs in the kernel alone, where their
// priority decides.
package procs
