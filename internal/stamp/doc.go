// Package stamp stamps the arrival of a response's bytes with the kernel's
// receive time instead of the time the reading goroutine ran.
//
// In: a run's requested mode and its targets (New), then each TCP
// connection it dials (Source.Wrap), whose Reads go through the returned
// Conn. Out: Conn.Last, the stamp of the bytes the last Read returned, in
// clock.Mono ns (CLOCK_MONOTONIC, the run's clock; the caller subtracts
// its run start), and Source.Meta, the run's trace.RunStamps: the mode
// requested and used, a note on every fallback, the REALTIME-to-monotonic
// offset with its width, re-measures and drift, and counts of the reads
// stamped by the kernel, by the clock, split and observed.
//
// Modes (trace.StampGoroutine, trace.StampKernel, trace.StampKernelOffset):
//
//   - goroutine: no Conn; the caller stamps with clock.Mono when the read
//     returned to its goroutine: the arrival plus the time the goroutine
//     waited to run.
//   - kernel: the kernel's software receive stamp of the last TCP segment
//     the read returned (SO_TIMESTAMPING, read with recvmsg), converted to
//     the run's clock (clock.RealToMono, measured again every second): the
//     scheduling wait is gone, but several events that queued up before a
//     late read share its stamp.
//   - kernel-offset (DefaultMode): as kernel, and a read that brings more
//     than one SSE event is handed out one event at a time (the rest kept
//     for the next Reads, which need no syscall), so that every Read ends
//     at an event's byte offset on the connection; an arrival observer
//     records when each byte offset arrived, with a kernel receive stamp,
//     and the event gets the earlier of the two times, late reader or
//     not. The kernel alone cannot tell: TCP merges queued segments and
//     keeps the newest stamp.
//
// Kernel-offset has two observers. The packet tap (tap_linux.go), where
// the process may open a packet socket (CAP_NET_RAW): the kernel copies
// every incoming TCP segment's headers, with its receive stamp, into a
// ring mapped into the client, before TCP merges anything; a read drains
// the ring when it needs an arrival not drained yet. No process, no wake
// per arrival; its cost is the client's own. Else the observer process:
//
// The observer (observer_linux.go) is this same executable started again
// with TRACEKIT_ARRIVAL_OBSERVER set to its parent's process id; it becomes
// the observer in ObserverMain, which every program that can run a
// kernel-offset replay calls first thing in main (a test binary, in
// TestMain). A program that does not call it starts no observer at all.
// Protocol: the table of arrivals is a memfd both processes map (fd 3 in
// the child); on a SOCK_SEQPACKET pair (fd 4) the child first says what
// scheduling priority it got, then the client sends add (a slot,
// a generation, the socket by SCM_RIGHTS) and del (a slot) messages, and
// the child acknowledges an add by storing its generation in the slot;
// closing the pair ends the child.
//
// Waiting (poll_linux.go): a stamped socket is taken out of Go's
// netpoller and waited for in one epoll set per process, whose goroutine
// wakes the readers of the sockets with new bytes; a read tries recvmsg
// only after such an edge, not once in vain before it waits. Under load
// (more than 2,000 edges a second from 32 sockets or more: batcher in
// batch.go) the poller sleeps a millisecond after each batch, so that one
// wake-up serves many arrivals: the kernel stamped them already, so no
// stamp moves, but in kernel mode events of one stream closer than that
// may be read together.
// The poller's goroutine starts with the process's first stamped socket
// and ends when the last one closes.
//
// Push (push_linux.go): a reader that only parses what comes hands the
// socket to the poller (Conn.Push) and waits for the end; the poller's
// goroutine then reads each arrival itself and calls the reader's
// PushFunc with the bytes and their stamp (cut at event ends in
// kernel-offset mode, as Read cuts them), so no goroutine wakes per
// event. Unpush hands the socket back to Read; bytes past where the
// PushFunc said stop stay for it (Conn.Pending). The pushed sockets one
// batch of edges found readable are read together, all their recvmsg
// calls in one system call through an io_uring (ringread_linux.go,
// package uring), each with its own control data and so its own stamp;
// where the kernel or a sandbox refuses io_uring, one recvmsg each
// (counted in trace.RunStamps.RingReads).
//
// One observer serves a process's runs in turn (pool_linux.go): Close leaves it
// idle for observerLinger (2 s), and the next run started within that
// takes it over, its CPU counted from there, instead of starting a process
// of its own; runs at once have one each, and one switched off or dead is
// never handed on.
//
// Standing down (watch.go): a client that may run on one CPU only starts
// no observer process (it could only take the reader's CPU), and one busy more
// than 90% of the time for two seconds running (it cannot keep up) is
// switched off (trace.RunStamps.ObserverOffNs); the connections read on
// with kernel stamps.
//
// Fallbacks, each said in trace.RunStamps.Note: not Linux means goroutine
// stamps; https targets get kernel stamps of the TCP reads under TLS (the
// bytes are encrypted, so no event ends can be found in them); no observer
// (no packet tap, and the program does not call ObserverMain, the child did not say its
// first word within 10 s or exited first, or it died, or too many
// connections at once) means kernel stamps, for the run or for the
// connections opened after, counted; a socket that refuses SO_TIMESTAMPING
// is read as before (goroutine stamps), counted; a read that carries no
// kernel stamp is stamped by the clock, counted in FallbackReads.
package stamp
