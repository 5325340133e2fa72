//go:build linux

package stamp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel keeps one receive stamp per queued buffer, and TCP merges a
// segment into the buffer still queued before it (receive coalescing),
// keeping the newer stamp: events that queue up before a late read have
// lost their own arrival times by the time anything reads them. The
// observer looks at them before that. It is a small child process (this
// same executable, started with observerEnv set, in ObserverMain) blocked
// in epoll_wait on a duplicate of every kernel-offset socket
// (edge-triggered: it wakes on each arrival); on each wake it peeks, per
// ready socket, at the queued bytes with their receive stamp (one recvmsg
// with MSG_PEEK, which takes nothing from the socket) and records
//
//	(bytes arrived so far = bytes the reader consumed + bytes peeked,
//	 the kernel's receive stamp of the newest of them)
//
// in the socket's ring, in memory shared with the client. A read handed
// out up to byte offset E of the connection is then stamped
//
//	min(kernel stamp of its recvmsg, earliest observed time with bytes >= E)
//
// Both are no earlier than the arrival of byte E: a kernel stamp is its
// buffer's newest segment's. As the observation carries the kernel's
// stamp, a late wake costs nothing unless another segment merged into the
// buffer first.
//
// Why a process and not a thread: a goroutine returning from epoll_wait
// needs a P of the Go scheduler before it can run, and on a busy client
// (a wave of requests starting, or a loaded machine whose threads holding
// the Ps are descheduled) it waits for one for milliseconds, long enough
// for the next segment to merge. The child's runtime has nothing else to
// run, and its thread asks for real-time priority (SCHED_FIFO, else nice
// -10) so that its wake-up does not queue behind anyone's threads; what it
// got is in the run's stamp metadata.
//
// Protocol: on a SOCK_SEQPACKET pair the child first says what priority
// it got (the client waits observerStart for it, else there is no
// observer), then the client sends add (slot, generation, the socket by
// SCM_RIGHTS) and del (slot) messages; the child
// acknowledges an add by storing its generation in the slot (ackGen) after
// resetting the slot's ring, so records of a slot's previous connection
// are never read for the next one. Closing the pair ends the child.

// observerEnv, set in its environment to its parent's process id, makes
// this executable the observer when main calls ObserverMain.
const observerEnv = "TRACEKIT_ARRIVAL_OBSERVER"

// mainCalled says that this process called ObserverMain: its executable,
// started again, becomes the observer. Without it there is no observer
// to start (see startObserver).
var mainCalled atomic.Bool

// ObserverMain makes this process the arrival observer, and exits when
// the observer ends, if it was started as one; else it returns at once.
// A program that can run kernel-offset replays calls it first thing in
// main (a test binary, in TestMain): the observer is the same executable
// started again, and a program that does not call it gets kernel stamps,
// the run's note saying that the observer did not start.
func ObserverMain() {
	mainCalled.Store(true)
	v, ok := os.LookupEnv(observerEnv)
	if !ok {
		return
	}
	// Only the child the client started serves: the variable may have
	// reached a process further down (one this program started for
	// another reason), which must run as itself and not pass it on.
	if v != strconv.Itoa(os.Getppid()) {
		os.Unsetenv(observerEnv)
		return
	}
	os.Exit(observeChild())
}

// observerStart bounds the wait for the observer's first word; a program
// that forgot ObserverMain runs as itself instead and never says it.
var observerStart = 10 * time.Second

// observerArgs are the arguments the observer is started with: none, as
// it needs none; tests choose with them what their binary runs.
var observerArgs []string

// arrivalRing is the size of a connection's ring of observations.
const arrivalRing = 32

// maxSlots bounds the connections observed at once (131,072: beyond the
// 100,000 streams one process is to hold); later ones read with kernel
// stamps (counted in the run's note). The table is virtual memory (808
// bytes a slot, 106 MB in all) touched a page at a time, as slots are
// used.
const maxSlots = 1 << 17

// peekMax bounds the bytes one peek copies: the stamp is then the
// buffer's holding the last byte copied, still a valid observation of
// fewer bytes.
const peekMax = 16 << 10

// arrival is one observation (CLOCK_REALTIME ns); seq is odd while the
// child writes it.
type arrival struct {
	seq   atomic.Uint64
	bytes atomic.Int64
	at    atomic.Int64
}

// slot is one connection's observations, in the shared table.
type slot struct {
	gen      atomic.Uint64 // client: the registration using the slot
	ackGen   atomic.Uint64 // child: the registration its records are of
	consumed atomic.Int64  // client: bytes the reader has taken from the socket
	head     atomic.Uint64 // child
	last     atomic.Int64  // child: the last recorded byte count
	ring     [arrivalRing]arrival
}

// record stores (bytes, at) when bytes grew; child only.
func (s *slot) record(bytes, at int64) {
	if bytes <= s.last.Load() {
		return
	}
	s.last.Store(bytes)
	h := s.head.Load()
	e := &s.ring[h%arrivalRing]
	e.seq.Add(1)
	e.bytes.Store(bytes)
	e.at.Store(at)
	e.seq.Add(1)
	s.head.Store(h + 1)
}

// firstAt is the earliest observed time (REALTIME ns) at which at least
// end bytes had arrived on registration gen, false when no kept
// observation of it covers end.
func (s *slot) firstAt(gen uint64, end int64) (int64, bool) {
	if s.ackGen.Load() != gen {
		return 0, false // the child has not taken the connection up yet
	}
	h := s.head.Load()
	var at int64
	found := false
	for k := h; k > 0 && h-k < arrivalRing; k-- {
		e := &s.ring[(k-1)%arrivalRing]
		q := e.seq.Load()
		b, t := e.bytes.Load(), e.at.Load()
		if q%2 == 1 || e.seq.Load() != q {
			continue // being overwritten: older than anything kept
		}
		if b < end {
			break // older observations saw fewer bytes
		}
		at, found = t, true
	}
	return at, found
}

// The control messages.
const (
	opAdd = 1
	opDel = 2
)

type ctlMsg struct {
	op, slot uint32
	gen      uint64
}

// obsReg is a connection's registration with the observer.
type obsReg struct {
	o   *observer
	s   *slot
	idx uint32
	gen uint64
}

// observer is the client's side of the child.
type observer struct {
	priority string
	table    []byte // the shared mapping
	slots    *[maxSlots]slot
	ctl      int // the client's end of the control pair
	cmd      *exec.Cmd
	exited   chan struct{}
	lastCPU  atomic.Int64 // the highest CPU time read (cpuNs)

	// mu guards the slots, the control pair's life and the mapping's: a
	// connection that outlives stop keeps the table mapped until it
	// closes. Taken on dial and close only.
	mu      sync.Mutex
	free    []uint32
	next    uint32
	gen     uint64
	live    int  // registered connections
	stopped bool // ctl is closed
	dead    bool // the control pair failed: no more adds
}

// startObserver starts the child; its error means kernel-offset cannot
// observe arrivals here.
func startObserver() (*observer, error) {
	if !mainCalled.Load() {
		return nil, errors.New("the observer did not start: this program does not call stamp.ObserverMain at the start of main")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable for the observer: %w", err)
	}
	size := int(unsafe.Sizeof([maxSlots]slot{}))
	mfd, err := unix.MemfdCreate("tracekit-arrivals", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	mf := os.NewFile(uintptr(mfd), "arrivals")
	defer mf.Close()
	if err := unix.Ftruncate(mfd, int64(size)); err != nil {
		return nil, fmt.Errorf("sizing the arrival table: %w", err)
	}
	table, err := unix.Mmap(mfd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the arrival table: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Munmap(table)
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "observer-control")
	o := &observer{table: table, slots: (*[maxSlots]slot)(unsafe.Pointer(&table[0])), ctl: fds[0], exited: make(chan struct{})}
	o.cmd = exec.Command(exe, observerArgs...)
	// A race-detector build sleeps a second at exit unless told not to.
	race := "atexit_sleep_ms=0"
	if g := os.Getenv("GORACE"); g != "" {
		race = g + " " + race
	}
	o.cmd.Env = append(os.Environ(), observerEnv+"="+strconv.Itoa(os.Getpid()), "GORACE="+race)
	o.cmd.ExtraFiles = []*os.File{mf, child} // fds 3 and 4
	o.cmd.Stderr = os.Stderr
	err = o.cmd.Start()
	child.Close() // the child's own copy is its only one: its exit reads as EOF here
	if err != nil {
		o.release()
		return nil, fmt.Errorf("starting the observer %s: %w", exe, err)
	}
	go func() { o.cmd.Wait(); close(o.exited) }() // owned by o: ends when the child does
	// The child says what priority it got, then serves.
	var buf [128]byte
	n, err := readWithin(o.ctl, buf[:], observerStart)
	if err != nil || n == 0 {
		o.cmd.Process.Kill()
		<-o.exited
		o.release()
		if err == nil {
			err = errors.New("it exited without a word")
		}
		return nil, fmt.Errorf("the observer did not start: %w (%v)", err, o.cmd.ProcessState)
	}
	o.priority = string(buf[:n])
	return o, nil
}

// readWithin reads from the blocking fd once something arrived, or the
// peer closed it, within d.
func readWithin(fd int, p []byte, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, fmt.Errorf("no word within %v", d)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		ready, err := unix.Poll(pfd, int(left.Milliseconds())+1)
		switch {
		case err == unix.EINTR || (err == nil && ready == 0):
			continue
		case err != nil:
			return 0, fmt.Errorf("poll: %w", err)
		}
		n, err := unix.Read(fd, p)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

func (o *observer) release() {
	unix.Close(o.ctl)
	unix.Munmap(o.table)
}

// add registers fd; the registration removes it.
func (o *observer) add(fd int) (obsReg, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead || o.stopped {
		return obsReg{}, errors.New("the observer is gone")
	}
	var idx uint32
	switch {
	case len(o.free) > 0:
		idx = o.free[len(o.free)-1]
		o.free = o.free[:len(o.free)-1]
	case o.next < maxSlots:
		idx = o.next
		o.next++
	default:
		return obsReg{}, fmt.Errorf("more than %d connections at once", maxSlots)
	}
	o.gen++
	r := obsReg{o: o, s: &o.slots[idx], idx: idx, gen: o.gen}
	r.s.consumed.Store(0)
	r.s.gen.Store(r.gen)
	if err := o.send(ctlMsg{op: opAdd, slot: idx, gen: r.gen}, unix.UnixRights(fd)); err != nil {
		o.free = append(o.free, idx)
		return obsReg{}, err
	}
	o.live++
	return r, nil
}

// remove unregisters a connection before its socket closes (the child's
// duplicate would keep it open); the last one after stop unmaps the table.
func (o *observer) remove(r obsReg) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.stopped && !o.dead && o.send(ctlMsg{op: opDel, slot: r.idx, gen: r.gen}, nil) == nil {
		o.free = append(o.free, r.idx)
	} // else the slot stays taken: the child may still write it
	o.live--
	if o.stopped && o.live == 0 {
		unix.Munmap(o.table)
	}
}

// send writes one control message; o.mu is held.
func (o *observer) send(m ctlMsg, oob []byte) error {
	b := (*[unsafe.Sizeof(ctlMsg{})]byte)(unsafe.Pointer(&m))[:]
	if err := unix.Sendmsg(o.ctl, b, oob, nil, unix.MSG_NOSIGNAL); err != nil {
		o.dead = true
		return fmt.Errorf("telling the observer: %w", err)
	}
	return nil
}

// reusable says whether o can serve another run: not stopped, its control
// pair working and the child alive.
func (o *observer) reusable() bool {
	o.mu.Lock()
	ok := !o.stopped && !o.dead
	o.mu.Unlock()
	select {
	case <-o.exited:
		return false
	default:
		return ok
	}
}

// stop ends the child (closing the pair is its signal) and unmaps the
// table once no connection uses it.
func (o *observer) stop() {
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		return
	}
	o.stopped = true
	o.cpuNs() // its last reading while alive: the exit's rusage is coarser
	unix.Close(o.ctl)
	if o.live == 0 {
		unix.Munmap(o.table)
	}
	o.mu.Unlock()
	select {
	case <-o.exited:
	case <-time.After(5 * time.Second):
		o.cmd.Process.Kill()
		<-o.exited
	}
}

// cpuNs is the observer process's CPU time so far in ns (the sum over
// its threads of the scheduler's run time), 0 when it cannot be read.
func (o *observer) cpuNs() int64 {
	select {
	case <-o.exited: // its threads are gone: what the kernel kept of it
		if ps := o.cmd.ProcessState; ps != nil {
			return max(o.lastCPU.Load(), int64(ps.UserTime()+ps.SystemTime()))
		}
		return o.lastCPU.Load()
	default:
	}
	n := o.schedNs()
	for { // never less than an earlier reading: the caller takes differences
		last := o.lastCPU.Load()
		if n <= last {
			return last
		}
		if o.lastCPU.CompareAndSwap(last, n) {
			return n
		}
	}
}

// schedNs sums the scheduler's run time over the observer's threads.
func (o *observer) schedNs() int64 {
	dir := fmt.Sprintf("/proc/%d/task", o.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				sum += v
			}
		}
	}
	return sum
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

// observeChild is the observer process: fd 3 is the table, fd 4 the
// control pair. It returns its exit code.
func observeChild() int {
	runtime.LockOSThread() // keep this thread, and the priority it gets
	const tfd, cfd = 3, 4
	size := int(unsafe.Sizeof([maxSlots]slot{}))
	table, err := unix.Mmap(tfd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tracekit arrival observer: mapping the table: %v\n", err)
		return 1
	}
	slots := (*[maxSlots]slot)(unsafe.Pointer(&table[0]))
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tracekit arrival observer: epoll_create1: %v\n", err)
		return 1
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	*(*uint64)(unsafe.Pointer(&ev.Fd)) = 0 // id 0: control; slot i is i+1
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, cfd, &ev); err != nil {
		fmt.Fprintf(os.Stderr, "tracekit arrival observer: epoll_ctl: %v\n", err)
		return 1
	}
	unix.SetNonblock(cfd, true)
	if _, err := unix.Write(cfd, []byte(raisePriority())); err != nil {
		return 1
	}
	var (
		watch = make([]watched, maxSlots)
		evs   [256]unix.EpollEvent
		hdr   unix.Msghdr
		iov   unix.Iovec
		oob   [128]byte
		peek  = make([]byte, peekMax)
		msg   [unsafe.Sizeof(ctlMsg{})]byte
		rts   = make([]byte, unix.CmsgSpace(4*4))
	)
	for {
		n, errno := epollWait(epfd, evs[:], obsWaitMs)
		if errno == unix.EINTR {
			// How the runtime asks this goroutine to stop for it (a
			// collection): the raw wait does not tell the scheduler.
			runtime.Gosched()
			continue
		}
		if errno != 0 {
			return 1
		}
		wakeNs := time.Now().UnixNano() // CLOCK_REALTIME, as the kernel's stamps
		for i := range n {
			id := *(*uint64)(unsafe.Pointer(&evs[i].Fd))
			if id == 0 {
				if !childControl(epfd, cfd, slots, watch, msg[:], rts) {
					return 0
				}
				continue
			}
			w := &watch[id-1]
			if w.fd == 0 {
				continue
			}
			s := &slots[id-1]
			before := s.consumed.Load()
			m, err := recvmsg(uintptr(w.fd), &hdr, &iov, peek, oob[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if err != nil || m == 0 {
				continue
			}
			at := wakeNs
			if real, ok := rxStamp(&hdr, oob[:]); ok {
				at = min(at, real)
			}
			s.record(w.peeked(before, m), at)
		}
	}
}

// watched is the observer's own state of a slot's socket.
type watched struct {
	fd      int32 // the duplicate of the socket, 0 none
	peekOff bool  // peeks start at the socket's peek offset (SO_PEEK_OFF)
	end     int64 // peekOff: the connection offset the last peek ended at (a lower bound)
}

// peeked returns how many bytes of the connection had arrived by a peek
// that copied m bytes, with the reader's count at consumed before it (a
// lower bound, as a record must be). Without a peek offset, the peek
// began where the reader is. With one, it began where the last peek
// ended, or where the reader is if the reader went past that (the kernel
// moves the peek offset back by every byte read, down to 0): the start
// is max(end, consumed), each a lower bound of the true one, so no
// getsockopt per peek is needed to know it.
func (w *watched) peeked(consumed int64, m int) int64 {
	if !w.peekOff {
		return consumed + int64(m)
	}
	w.end = max(w.end, consumed) + int64(m)
	return w.end
}

// The observer waits with a raw system call: a blocking call made through
// the runtime's syscall path wakes the runtime's monitor thread each
// time, a context switch per arrival on top of the wait's own, which
// under load cost the observer a fifth of its CPU. A raw wait holds the
// goroutine's P, which the observer's runtime does not need meanwhile;
// when the runtime wants the goroutine to stop (a collection), its
// preemption signal ends the wait with EINTR, and the loop yields.
// obsWaitMs bounds a wait even so.
//
// It wakes for every arrival rather than sleeping between batches as the
// client's poller does: a nap of 200 us took a fifth of the observer's
// CPU away, but two events of a stream that come closer than that (a
// role chunk and the first token) were then peeked together, and the
// first one got the second's stamp, which is what the observer is there
// to prevent (calibrate at 5,000 streams: p99 75-83 us against 23-35).
const obsWaitMs = 100

func epollWait(epfd int, evs []unix.EpollEvent, msec int) (int, unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(msec), 0, 0)
	return int(n), e
}

// childControl handles the queued control messages; false: the client is
// gone.
func childControl(epfd, cfd int, slots *[maxSlots]slot, watch []watched, msg, rts []byte) bool {
	for {
		n, oobn, _, _, err := unix.Recvmsg(cfd, msg, rts, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			return true
		}
		if err != nil || n == 0 {
			return false
		}
		if n != len(msg) {
			continue
		}
		m := *(*ctlMsg)(unsafe.Pointer(&msg[0]))
		if m.slot >= maxSlots {
			continue
		}
		w := &watch[m.slot]
		if w.fd != 0 {
			unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, int(w.fd), nil)
			unix.Close(int(w.fd))
			*w = watched{}
		}
		if m.op != opAdd {
			continue
		}
		cms, err := unix.ParseSocketControlMessage(rts[:oobn])
		if err != nil || len(cms) == 0 {
			continue
		}
		got, err := unix.ParseUnixRights(&cms[0])
		if err != nil || len(got) != 1 {
			for _, fd := range got {
				unix.Close(fd)
			}
			continue
		}
		s := &slots[m.slot]
		s.ackGen.Store(0)
		s.head.Store(0)
		s.last.Store(0)
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET}
		*(*uint64)(unsafe.Pointer(&ev.Fd)) = uint64(m.slot) + 1
		if unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, got[0], &ev) != nil {
			unix.Close(got[0])
			continue
		}
		// With a peek offset (TCP since Linux 6.9) a peek copies only the
		// bytes no earlier peek saw, however far behind the reader is;
		// without, every peek copies all that is queued, a cost that grows
		// exactly when the client is slow.
		*w = watched{fd: int32(got[0]), peekOff: unix.SetsockoptInt(got[0], unix.SOL_SOCKET, unix.SO_PEEK_OFF, 0) == nil}
		s.ackGen.Store(m.gen)
	}
}
