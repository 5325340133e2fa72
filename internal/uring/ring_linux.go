//go:build linux

package uring

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's interface (include/uapi/linux/io_uring.h).
const (
	offSQRing = 0
	offSQEs   = 0x10000000

	featSingleMmap = 1 << 0
	enterGetEvents = 1 << 0

	opRecvmsg = 10

	sqeSize = 64
	cqeSize = 16
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is a submission queue entry as the kernel reads it, with the fields
// a recvmsg uses named.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64 // the msghdr
	len         uint32
	msgFlags    uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Msg is one recvmsg of a batch: Fd read into Hdr (its iovec and control
// buffer set as for recvmsg(2)) with Flags, to which MSG_DONTWAIT is
// added. Recvmsg fills N (the bytes read) or Errno, and sets Done.
type Msg struct {
	Fd    int
	Hdr   *unix.Msghdr
	Flags int
	N     int
	Errno syscall.Errno
	Done  bool // the call was made: N or Errno is its result
}

// Ring is an io_uring for batches of recvmsg. Not safe for concurrent use:
// one goroutine submits.
type Ring struct {
	fd      int
	size    int
	rings   []byte // the submission and completion rings (one mapping)
	sqeMem  []byte
	sqTail  *uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []sqe
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    []cqe
}

// New sets up a ring for batches of up to entries recvmsg calls (rounded
// up to a power of two by the kernel).
func New(entries int) (*Ring, error) {
	if entries < 1 || entries > 4096 {
		return nil, fmt.Errorf("uring: %d entries: want 1 to 4096", entries)
	}
	var p params
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r := &Ring{fd: int(fd), size: int(p.sqEntries)}
	if err := r.mapRings(&p); err != nil {
		unix.Close(r.fd)
		return nil, err
	}
	if err := r.probe(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// probe checks that a recvmsg through the ring completes at once with
// EAGAIN on an empty socket, without waiting: Recvmsg waits for every
// call, so a kernel that parked the call until bytes came (or refused the
// operation) would stall its caller. It submits without waiting and looks.
func (r *Ring) probe() error {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("uring probe: socketpair: %w", err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	var (
		b   [1]byte
		iov = unix.Iovec{Base: &b[0]}
		hdr = unix.Msghdr{Iov: &iov}
	)
	iov.SetLen(1)
	hdr.SetIovlen(1)
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & r.sqMask
	r.sqes[idx] = sqe{opcode: opRecvmsg, fd: int32(sp[0]), addr: uint64(uintptr(unsafe.Pointer(&hdr))), len: 1,
		msgFlags: unix.MSG_DONTWAIT}
	r.sqArray[idx] = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	for {
		_, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return fmt.Errorf("uring probe: io_uring_enter: %w", e)
		}
		break
	}
	msgs := []Msg{{}}
	r.reap(msgs)
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&b)
	if !msgs[0].Done || msgs[0].Errno != unix.EAGAIN {
		// Closing the ring (the caller does) cancels a parked call.
		return fmt.Errorf("uring probe: a recvmsg of an empty socket gave %d bytes, errno %v, done %v; want EAGAIN at once",
			msgs[0].N, msgs[0].Errno, msgs[0].Done)
	}
	return nil
}

func (r *Ring) mapRings(p *params) error {
	if p.features&featSingleMmap == 0 {
		return fmt.Errorf("io_uring: the kernel lacks IORING_FEAT_SINGLE_MMAP (5.4)")
	}
	size := max(int(p.sqOff.array)+int(p.sqEntries)*4, int(p.cqOff.cqes)+int(p.cqEntries)*cqeSize)
	rings, err := unix.Mmap(r.fd, offSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap io_uring rings: %w", err)
	}
	sqeMem, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(rings)
		return fmt.Errorf("mmap io_uring entries: %w", err)
	}
	r.rings, r.sqeMem = rings, sqeMem
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&rings[off])) }
	// The submission head is the kernel's to move; a batch waits for all
	// its calls, so the ring is empty again before the next is written.
	r.sqTail = u32(p.sqOff.tail)
	r.sqMask = *u32(p.sqOff.ringMask)
	r.sqArray = unsafe.Slice(u32(p.sqOff.array), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = u32(p.cqOff.head), u32(p.cqOff.tail)
	r.cqMask = *u32(p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&rings[p.cqOff.cqes])), p.cqEntries)
	return nil
}

// Size is the most calls one Recvmsg batch may hold.
func (r *Ring) Size() int { return r.size }

// Recvmsg makes every recvmsg of msgs (at most Size) with one system call
// (more only when a signal interrupts the wait) and fills in their
// results. The headers, their iovecs and buffers must stay valid until it
// returns, which it does once every call completed. An error is the
// ring's own failure, after which the ring is closed and no call is in
// flight: those not Done were not made. The calls' failures are in their
// Errno.
func (r *Ring) Recvmsg(msgs []Msg) error {
	if r.fd < 0 {
		return fmt.Errorf("uring: the ring is closed")
	}
	if len(msgs) > r.size {
		return fmt.Errorf("uring: %d calls in a batch of at most %d", len(msgs), r.size)
	}
	tail := atomic.LoadUint32(r.sqTail)
	for i := range msgs {
		m := &msgs[i]
		idx := tail & r.sqMask
		r.sqes[idx] = sqe{
			opcode:   opRecvmsg,
			fd:       int32(m.Fd),
			addr:     uint64(uintptr(unsafe.Pointer(m.Hdr))),
			len:      1,
			msgFlags: uint32(m.Flags | unix.MSG_DONTWAIT),
			userData: uint64(i),
		}
		r.sqArray[idx] = idx
		m.N, m.Errno, m.Done = 0, 0, false
		tail++
	}
	// The entries are written before the tail that publishes them.
	atomic.StoreUint32(r.sqTail, tail)

	toSubmit, left := len(msgs), len(msgs)
	for left > 0 {
		flags := uintptr(enterGetEvents)
		n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(left), flags, 0, 0)
		switch {
		case e == unix.EINTR:
		case e != 0:
			// Out of kernel memory, or a bug here. Closing the ring
			// cancels what it still holds; a recvmsg issued without
			// waiting has completed already.
			r.reap(msgs)
			r.Close()
			return fmt.Errorf("io_uring_enter: %w", e)
		default:
			toSubmit -= int(n)
		}
		left -= r.reap(msgs)
	}
	runtime.KeepAlive(msgs)
	return nil
}

// reap takes the completions there are, filling their calls' results; it
// returns how many it took.
func (r *Ring) reap(msgs []Msg) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	got := int(tail - head)
	for ; head != tail; head++ {
		c := r.cqes[head&r.cqMask]
		if c.userData >= uint64(len(msgs)) {
			continue // not ours: cannot happen, one batch at a time
		}
		m := &msgs[c.userData]
		m.Done = true
		if c.res < 0 {
			m.Errno = syscall.Errno(-c.res)
		} else {
			m.N = int(c.res)
		}
	}
	atomic.StoreUint32(r.cqHead, head)
	return got
}

// Close unmaps the rings and closes the ring; a closed ring's Recvmsg
// fails.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return nil
	}
	unix.Munmap(r.sqeMem)
	unix.Munmap(r.rings)
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}
