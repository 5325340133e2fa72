//go:build linux

package replay

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/clock"
)

// The kernel keeps one receive stamp per queued buffer, and TCP merges a
// segment into the buffer still queued before it (receive coalescing),
// keeping the newer stamp: events that queue up before a late read have
// lost their own arrival times by the time anything reads them. The
// observer looks at them before that. It is one OS thread blocked in
// epoll_wait on every kernel-offset socket (edge-triggered: it wakes on
// each arrival); on each wake it peeks, per ready socket, at the queued
// bytes with their receive stamp (one recvmsg with MSG_PEEK, which takes
// nothing from the socket) and records
//
//	(bytes arrived so far = bytes the reader consumed + bytes peeked,
//	 the kernel's receive stamp of the newest of them)
//
// in the socket's ring. A read handed out up to byte offset E of the
// connection is then stamped
//
//	min(kernel stamp of its recvmsg, earliest observed time with bytes >= E)
//
// Both are no earlier than the arrival of byte E: a kernel stamp is its
// buffer's newest segment's. As the observation carries the kernel's stamp,
// not the time the observer woke, a late wake costs nothing unless another
// segment merged into the buffer first. (The observer's goroutine needs a
// P of the Go scheduler after each wake, which a busy client may make it
// wait for.) The thread asks for real-time priority (SCHED_FIFO) and else
// a lower nice value, so that its wake-up does not queue behind the
// client's own threads; what it got is in the run's stamp note.

// peekMax bounds the bytes one peek copies: the stamp is then the
// buffer's holding the last byte copied, still a valid observation of
// fewer bytes.
const peekMax = 16 << 10

// arrivalRing is the size of a connection's ring of observations.
const arrivalRing = 32

// arrival is one observation; seq is odd while the observer writes it.
type arrival struct {
	seq   atomic.Uint64
	bytes atomic.Int64
	at    atomic.Int64
}

// arrivals is one connection's observations (one writer: the observer).
type arrivals struct {
	fd       int
	consumed atomic.Int64 // bytes the reader has taken from the socket
	head     atomic.Uint64
	last     int64 // the observer's last recorded byte count
	ring     [arrivalRing]arrival
}

// record stores (bytes, at) when bytes grew; observer only.
func (a *arrivals) record(bytes, at int64) {
	if bytes <= a.last {
		return
	}
	a.last = bytes
	h := a.head.Load()
	s := &a.ring[h%arrivalRing]
	s.seq.Add(1)
	s.bytes.Store(bytes)
	s.at.Store(at)
	s.seq.Add(1)
	a.head.Store(h + 1)
}

// firstAt is the earliest observed time at which at least end bytes had
// arrived, false when no kept observation covers end.
func (a *arrivals) firstAt(end int64) (int64, bool) {
	h := a.head.Load()
	var at int64
	found := false
	for k := h; k > 0 && h-k < arrivalRing; k-- {
		s := &a.ring[(k-1)%arrivalRing]
		q := s.seq.Load()
		b, t := s.bytes.Load(), s.at.Load()
		if q%2 == 1 || s.seq.Load() != q {
			continue // being overwritten: older than anything kept
		}
		if b < end {
			break // older observations saw fewer bytes
		}
		at, found = t, true
	}
	return at, found
}

// observer is the epoll thread of a run's kernel-offset connections.
type observer struct {
	epfd, stopfd int
	conns        sync.Map // id -> *arrivals
	next         atomic.Uint64
	wakes        atomic.Int64
	priority     string
	done         chan struct{}
	conv         *clock.RealToMono

	// The peek in progress, observer thread only.
	hdr  unix.Msghdr
	iov  unix.Iovec
	oob  [128]byte
	peek [peekMax]byte
}

// startObserver starts the thread; its error means kernel-offset cannot
// observe arrivals here.
func startObserver(conv *clock.RealToMono) (*observer, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	stopfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	*(*uint64)(unsafe.Pointer(&ev.Fd)) = 0 // id 0: the stop event
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, stopfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(stopfd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	o := &observer{epfd: epfd, stopfd: stopfd, done: make(chan struct{}), conv: conv}
	ready := make(chan struct{})
	go o.loop(ready) // owned by o: ends at stop
	<-ready
	return o, nil
}

// raisePriority asks the calling thread for SCHED_FIFO, else nice -10,
// and says what it got.
func raisePriority() string {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 1 /* SCHED_FIFO */, Priority: 1}
	if unix.SchedSetAttr(0, &attr, 0) == nil {
		return "SCHED_FIFO"
	}
	if unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -10) == nil {
		return "nice -10"
	}
	return "normal priority (no permission to raise it)"
}

func (o *observer) loop(ready chan<- struct{}) {
	runtime.LockOSThread() // the thread dies with the goroutine: its priority goes with it
	defer close(o.done)
	o.priority = raisePriority()
	close(ready)
	var evs [256]unix.EpollEvent
	for {
		n, err := unix.EpollWait(o.epfd, evs[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		at := clock.Mono()
		o.wakes.Add(1)
		for i := range n {
			id := *(*uint64)(unsafe.Pointer(&evs[i].Fd))
			if id == 0 {
				return
			}
			v, ok := o.conns.Load(id)
			if !ok {
				continue
			}
			a := v.(*arrivals)
			before := a.consumed.Load()
			// A close racing this may reuse the fd: the peek then lands
			// in a ring nobody reads again (and takes nothing).
			n, err := recvmsg(uintptr(a.fd), &o.hdr, &o.iov, o.peek[:], o.oob[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if err != nil || n == 0 {
				continue
			}
			t := at
			if real, ok := rxStamp(&o.hdr, o.oob[:]); ok {
				t = min(t, o.conv.Mono(real))
			}
			a.record(before+int64(n), t)
		}
	}
}

// add registers fd; the returned id removes it.
func (o *observer) add(fd int, a *arrivals) (uint64, error) {
	id := o.next.Add(1)
	a.fd = fd
	o.conns.Store(id, a)
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET}
	*(*uint64)(unsafe.Pointer(&ev.Fd)) = id
	if err := unix.EpollCtl(o.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		o.conns.Delete(id)
		return 0, fmt.Errorf("epoll_ctl: %w", err)
	}
	return id, nil
}

// remove unregisters a connection before its socket closes.
func (o *observer) remove(id uint64) {
	if v, ok := o.conns.LoadAndDelete(id); ok {
		unix.EpollCtl(o.epfd, unix.EPOLL_CTL_DEL, v.(*arrivals).fd, nil)
	}
}

// stop ends the thread and closes its descriptors.
func (o *observer) stop() {
	var one = [8]byte{1}
	unix.Write(o.stopfd, one[:])
	<-o.done
	unix.Close(o.epfd)
	unix.Close(o.stopfd)
}
