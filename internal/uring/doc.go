// Package uring reads many sockets with one system call: a batch of
// recvmsg calls, one per socket, submitted together through an io_uring
// and waited for together. In flow the sockets with their message
// headers (buffers and control data, as recvmsg(2) takes them); out come
// each call's byte count or error, and the headers as recvmsg leaves them
// (the control length written back), so a receive stamp is read from
// them as after recvmsg.
//
// Why: on a virtual machine a system call's entry and exit cost more than
// the read itself. A poller that finds twenty sockets readable after a
// batch of edges made twenty recvmsg calls; through the ring it makes
// one io_uring_enter. Each call is issued non-blocking (MSG_DONTWAIT), so
// a socket with nothing to read completes with EAGAIN instead of waiting.
//
// New fails where the kernel has no io_uring or a sandbox forbids it
// (ENOSYS, EPERM, the io_uring_disabled sysctl), or where its first
// recvmsg, of an empty socket, does not complete at once with EAGAIN; the
// caller then reads with recvmsg one socket at a time.
package uring
