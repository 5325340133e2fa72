//go:build linux

package stamp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The packet tap is kernel-offset's first choice of observer: a packet
// socket (AF_PACKET, TPACKET_V2 ring) that the kernel hands a copy of
// every incoming TCP segment's headers to, with its receive stamp, before
// TCP queues the segment and before any merging. It needs no process and
// no wake-up of its own: the ring is read (drain) when a read needs the
// arrival of a byte that no drained segment covered yet, and on every
// turn of the poller. Every segment has its own stamp, so a late reader
// loses nothing, however late, as long as the ring does not overflow (its
// drops are counted in the run's note). It needs CAP_NET_RAW; without it
// kernel-offset uses the observer process (observer_linux.go).
//
// A connection's byte offset is its segment's sequence number less the
// server's initial one, which the tap learns from the SYN-ACK it saw
// before the dial returned: a connection whose SYN-ACK it did not see
// (the tap was not open yet, or the ring dropped it) reads with kernel
// stamps.
//
// The tap's stamp (CLOCK_REALTIME) is the socket buffer's software
// receive stamp where the device path set one, the one SO_TIMESTAMPING
// then reports to the reader too; on loopback, whose buffers carry none
// yet, the tap takes the time as it sees the packet, before IP and TCP
// run: a microsecond or less before TCP's own stamp.

// Ring geometry: 104,704 frames of 160 bytes (a frame's header, and the
// packet's IP and TCP headers from byte 80 on) in 256 blocks of
// 64 KiB (16 MiB): 1 s of arrivals at 100,000 segments a second, or 5 s
// at 18,000, with no drain at all. The poller drains it on every turn.
const (
	tapFrame     = 160
	tapBlock     = 1 << 16
	tapBlocks    = 256
	tapPerBlock  = tapBlock / tapFrame
	tapSynMaxAge = time.Minute // a SYN-ACK's connection registers within this or never
	tapSynMax    = 1 << 18     // SYN-ACKs kept at once
)

// flowKey names a connection seen from this host: its local and remote
// address and port (IPv4 as IPv4-mapped IPv6).
type flowKey struct {
	local, remote [16]byte
	lport, rport  uint16
}

// is reports whether k and o are the same connection. Field by field,
// ports first: the compiler compares them in registers, where == on the
// whole struct calls memequal once a segment (2.3% of the client's CPU at
// 10,800 streams in kernel-offset mode).
func (k *flowKey) is(o *flowKey) bool {
	return k.rport == o.rport && k.lport == o.lport && k.local == o.local && k.remote == o.remote
}

// flow is one registered connection's arrivals; tap.mu guards it.
type flow struct {
	key  flowKey
	next *flow  // the next flow of the same local port (tap.byPort)
	isn  uint32 // the server's initial sequence number
	end  int64  // connection bytes that arrived in order so far
	// rec are the arrivals not yet read past, oldest first, from rec[head]
	// on: (bytes arrived, REALTIME ns), bytes rising.
	rec  []arrivalRec
	head int
}

type arrivalRec struct{ bytes, at int64 }

// tapBacklog bounds a flow's records: a reader more than that many
// segments behind gets, for the oldest of them, a later record's stamp
// (still no later than the kernel's).
const tapBacklog = 4096

// synAck is a SYN-ACK's sequence number, kept until its connection
// registers or it ages out.
type synAck struct {
	isn uint32
	at  time.Time
}

// tap is the process's packet tap, shared by its runs (acquireTap).
type tap struct {
	fd     int
	ring   []byte
	frames int

	mu   sync.Mutex
	next int // the next frame to read
	// byPort lists the registered flows by local port: a segment finds
	// its flow with no hashing, in a list of one but where a port serves
	// connections to several servers.
	byPort []*flow
	syn    map[flowKey]synAck
	synQ   []flowKey // syn's keys in arrival order, for ageing
	drops  atomic.Int64
	users  int // runs using it (tapShared.mu)
}

// tapShared holds the process's tap while runs use it.
var tapShared struct {
	mu  sync.Mutex
	t   *tap
	off bool // tests: act as if the tap cannot open
}

// liveTap is the process's open tap, for the poller to drain.
var liveTap atomic.Pointer[tap]

// drainTap drains the process's tap unless someone is at it already: the
// poller's turn, so that the ring empties while the process runs even
// when no read needs an arrival (a reader seconds late, at a ramp).
func drainTap() {
	t := liveTap.Load()
	if t == nil || !t.mu.TryLock() {
		return
	}
	if t.ring != nil {
		t.drain()
	}
	t.mu.Unlock()
}

// acquireTap returns the process's tap, opening it for the first run;
// releaseTap gives it back and the last run's closes it.
func acquireTap() (*tap, error) {
	tapShared.mu.Lock()
	defer tapShared.mu.Unlock()
	if tapShared.off {
		return nil, errors.New("turned off")
	}
	if tapShared.t == nil {
		t, err := openTap(tapBlocks)
		if err != nil {
			return nil, err
		}
		tapShared.t = t
		liveTap.Store(t)
	}
	tapShared.t.users++
	return tapShared.t, nil
}

func releaseTap(t *tap) {
	tapShared.mu.Lock()
	defer tapShared.mu.Unlock()
	if t.users--; t.users > 0 {
		return
	}
	if tapShared.t == t {
		tapShared.t = nil
		liveTap.Store(nil)
	}
	t.close()
}

// close closes the socket and unmaps the ring; connections still
// registered read on with kernel stamps.
func (t *tap) close() {
	t.mu.Lock()
	unix.Close(t.fd)
	unix.Munmap(t.ring)
	t.ring, t.byPort = nil, nil
	t.mu.Unlock()
}

// openTap opens the packet socket with its filter and a ring of blocks
// blocks of tapBlock bytes; an error means this process cannot tap (no
// CAP_NET_RAW, or no packet sockets).
func openTap(blocks int) (*tap, error) {
	// Protocol 0 receives nothing until the bind, after the filter is on.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	fail := func(what string, err error) (*tap, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("packet socket: %s: %w", what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return fail("TPACKET_V2", err)
	}
	prog := tapFilter()
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		return fail("filter", err)
	}
	// Our own sends are of no interest; older kernels lack the option,
	// and the filter drops them there.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	req := unix.TpacketReq{Block_size: tapBlock, Block_nr: uint32(blocks), Frame_size: tapFrame, Frame_nr: tapPerBlock * uint32(blocks)}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fail("ring", err)
	}
	ring, err := unix.Mmap(fd, 0, tapBlock*blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mapping the ring", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL)}); err != nil {
		unix.Munmap(ring)
		return fail("bind", err)
	}
	return &tap{fd: fd, ring: ring, frames: int(req.Frame_nr), byPort: make([]*flow, 1<<16), syn: make(map[flowKey]synAck)}, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// tapFilter keeps incoming TCP segments over IPv4 or IPv6 (no extension
// headers, no fragments) that carry bytes or a SYN, cut to their IP and
// TCP headers (at most what a frame holds after its own header: 80
// bytes): acknowledgements, of either side, never reach the ring, and no
// payload does (the tap sees every connection of the host, requests with
// their credentials included).
func tapFilter() []unix.SockFilter {
	const (
		ldB    = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
		ldH    = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS
		ldW    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		ldIndB = unix.BPF_LD | unix.BPF_B | unix.BPF_IND
		ldxMsh = unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH
		ldxImm = unix.BPF_LDX | unix.BPF_IMM
		ldxMem = unix.BPF_LDX | unix.BPF_MEM
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jgt    = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
		jset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ja     = unix.BPF_JMP | unix.BPF_JA
		rsh    = unix.BPF_ALU | unix.BPF_RSH | unix.BPF_K
		and    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		addX   = unix.BPF_ALU | unix.BPF_ADD | unix.BPF_X
		subX   = unix.BPF_ALU | unix.BPF_SUB | unix.BPF_X
		st     = unix.BPF_ST
		ret    = unix.BPF_RET | unix.BPF_K
		adOff  = 0xfffff000 // SKF_AD_OFF
		adType = 4          // SKF_AD_PKTTYPE
	)
	// Offsets are of the network header: a SOCK_DGRAM packet socket
	// starts there. M[0] = IP header length + TCP header length, M[1] =
	// TCP flags; A = the IP packet's length.
	return assemble([]bpfIns{
		{code: ldW, k: adOff + adType},
		{code: jeq, k: unix.PACKET_OUTGOING, jt: "drop"},
		{code: ldB, k: 0},
		{code: rsh, k: 4},
		{code: jeq, k: 6, jt: "v6"},
		{code: jeq, k: 4, jf: "drop"},
		// IPv4: TCP, not a fragment.
		{code: ldB, k: 9},
		{code: jeq, k: unix.IPPROTO_TCP, jf: "drop"},
		{code: ldH, k: 6},
		{code: jset, k: 0x1fff, jt: "drop"},
		{code: ldxMsh, k: 0},
		{code: ldIndB, k: 12},
		{code: rsh, k: 2},
		{code: and, k: 0x3c},
		{code: addX},
		{code: st, k: 0},
		{code: ldIndB, k: 13},
		{code: st, k: 1},
		{code: ldH, k: 2},
		{code: ja, jump: "payload"},
		// IPv6: TCP as the next header.
		{label: "v6", code: ldB, k: 6},
		{code: jeq, k: unix.IPPROTO_TCP, jf: "drop"},
		{code: ldB, k: 40 + 12},
		{code: rsh, k: 2},
		{code: and, k: 0x3c},
		{code: ldxImm, k: 40},
		{code: addX},
		{code: st, k: 0},
		{code: ldB, k: 40 + 13},
		{code: st, k: 1},
		{code: ldH, k: 4},
		{code: ldxImm, k: 40},
		{code: addX},
		// Bytes in the segment, or a SYN: keep.
		{label: "payload", code: ldxMem, k: 0},
		{code: subX},
		{code: jgt, k: 0, jt: "keep"},
		{code: unix.BPF_LD | unix.BPF_MEM, k: 1},
		{code: jset, k: 0x02, jt: "keep", jf: "drop"},
		{label: "keep", code: unix.BPF_LD | unix.BPF_MEM, k: 0},
		{code: unix.BPF_RET | unix.BPF_A}, // the headers only: no byte of anyone's payload
		{label: "drop", code: ret, k: 0},
	})
}

// bpfIns is a classic BPF instruction whose jumps name labels.
type bpfIns struct {
	label  string
	code   uint16
	k      uint32
	jt, jf string // conditional jumps' targets ("" the next instruction)
	jump   string // BPF_JA's target
}

// assemble resolves the labels of prog.
func assemble(prog []bpfIns) []unix.SockFilter {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	rel := func(i int, label string) int {
		if label == "" {
			return 0
		}
		to, ok := at[label]
		if !ok || to <= i {
			panic("bpf: no label " + label + " after instruction " + fmt.Sprint(i))
		}
		return to - i - 1
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		out[i] = unix.SockFilter{Code: in.code, K: in.k, Jt: uint8(rel(i, in.jt)), Jf: uint8(rel(i, in.jf))}
		if in.jump != "" {
			out[i].K = uint32(rel(i, in.jump))
		}
	}
	return out
}

// register starts recording local's connection to remote, nil when the
// tap did not see its SYN-ACK.
func (t *tap) register(local, remote net.Addr) *flow {
	k, ok := keyOf(local, remote)
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ring == nil {
		return nil
	}
	t.drain()
	sa, ok := t.syn[k]
	if !ok {
		return nil
	}
	delete(t.syn, k)
	return t.add(k, sa.isn)
}

// add starts a flow of k; t.mu is held.
func (t *tap) add(k flowKey, isn uint32) *flow {
	f := &flow{key: k, isn: isn, next: t.byPort[k.lport]}
	t.byPort[k.lport] = f
	return f
}

// unregister stops recording f's connection.
func (t *tap) unregister(f *flow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byPort == nil {
		return
	}
	for p := &t.byPort[f.key.lport]; *p != nil; p = &(*p).next {
		if *p == f {
			*p = f.next
			return
		}
	}
}

// lookup is the registered flow of k, nil when none; t.mu is held.
func (t *tap) lookup(k *flowKey) *flow {
	for f := t.byPort[k.lport]; f != nil; f = f.next {
		if f.key.is(k) {
			return f
		}
	}
	return nil
}

// keyOf is the flow key of a TCP connection's addresses.
func keyOf(local, remote net.Addr) (flowKey, bool) {
	l, ok1 := local.(*net.TCPAddr)
	r, ok2 := remote.(*net.TCPAddr)
	if !ok1 || !ok2 {
		return flowKey{}, false
	}
	var k flowKey
	copy(k.local[:], l.IP.To16())
	copy(k.remote[:], r.IP.To16())
	k.lport, k.rport = uint16(l.Port), uint16(r.Port)
	return k, true
}

// firstAt is the earliest time (REALTIME ns) at which the first end bytes
// of f's connection had all arrived, false when no kept record says.
func (t *tap) firstAt(f *flow, end int64) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.end < end && t.ring != nil {
		t.drain()
	}
	return f.firstAt(end)
}

// firstAt is the arrival of the first record with at least end bytes;
// it forgets the records before it, as reads only go on.
func (f *flow) firstAt(end int64) (int64, bool) {
	for f.head < len(f.rec) && f.rec[f.head].bytes < end {
		f.head++
	}
	if f.head == len(f.rec) {
		f.rec, f.head = f.rec[:0], 0
		return 0, false
	}
	return f.rec[f.head].at, true
}

// arrived records that f's connection received the bytes up to seq+n
// (seq the segment's first byte's sequence number) at at.
func (f *flow) arrived(seq uint32, n int, at int64) {
	// Offsets wrap at 4 GiB: place the segment's end next to what came.
	endSeq := seq + uint32(n)
	end := f.end + int64(int32(endSeq-(f.isn+1)-uint32(f.end)))
	start := end - int64(n)
	switch {
	case end <= f.end:
		return // nothing new: a retransmission
	case start > f.end:
		// A gap: a segment the ring dropped or the network reordered.
		// The bytes before this one came at a time nobody saw, so this
		// segment is no record either; the next in order are.
		f.end = end
		return
	}
	f.end = end
	if len(f.rec)-f.head >= tapBacklog {
		f.head++
	}
	if f.head > 0 && len(f.rec) == cap(f.rec) { // reuse the read part
		f.rec = f.rec[:copy(f.rec, f.rec[f.head:])]
		f.head = 0
	}
	f.rec = append(f.rec, arrivalRec{end, at})
}

// drain reads the ring's filled frames; t.mu is held.
func (t *tap) drain() {
	for {
		fr := t.frame(t.next)
		hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&fr[0]))
		status := atomic.LoadUint32(&hdr.Status)
		if status&unix.TP_STATUS_USER == 0 {
			return
		}
		if status&unix.TP_STATUS_LOSING != 0 {
			t.countDrops()
		}
		if int(hdr.Net)+int(hdr.Snaplen) <= tapFrame {
			t.segment(fr[hdr.Net:int(hdr.Net)+int(hdr.Snaplen)], int64(hdr.Sec)*1e9+int64(hdr.Nsec))
		}
		atomic.StoreUint32(&hdr.Status, unix.TP_STATUS_KERNEL)
		t.next = (t.next + 1) % t.frames
	}
}

// dropped is how many segments the ring dropped since it opened.
func (t *tap) dropped() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ring != nil {
		t.countDrops()
	}
	return t.drops.Load()
}

// frame is the ring's frame i: frames do not cross blocks.
func (t *tap) frame(i int) []byte {
	at := i/tapPerBlock*tapBlock + i%tapPerBlock*tapFrame
	return t.ring[at : at+tapFrame]
}

// countDrops adds the ring's drops since the last count (reading them
// resets the kernel's counter); t.mu is held.
func (t *tap) countDrops() {
	if s, err := unix.GetsockoptTpacketStats(t.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		t.drops.Add(int64(s.Drops))
	}
}

// segment takes one kept packet's headers, received at (REALTIME ns).
func (t *tap) segment(p []byte, at int64) {
	k, seq, n, flags, ok := parseSegment(p)
	switch {
	case !ok:
	case flags&tcpSyn != 0:
		if flags&tcpAck != 0 {
			t.sawSynAck(k, seq)
		}
	case n > 0:
		if f := t.lookup(&k); f != nil {
			f.arrived(seq, n, at)
		}
	}
}

// TCP flags.
const (
	tcpSyn = 0x02
	tcpAck = 0x10
)

// parseSegment reads an IPv4 or IPv6 packet's TCP header: its connection
// as seen from this host (the packet's destination is local), its
// sequence number, its bytes and its flags; false when p is not a TCP
// segment whose header up to the flags is in p.
func parseSegment(p []byte) (k flowKey, seq uint32, n int, flags byte, ok bool) {
	var tcp []byte
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		hl := int(p[0]&0xf) * 4
		if hl < 20 || len(p) < hl+14 || p[9] != unix.IPPROTO_TCP {
			return k, 0, 0, 0, false
		}
		copy(k.local[:], net.IPv4(p[16], p[17], p[18], p[19]))
		copy(k.remote[:], net.IPv4(p[12], p[13], p[14], p[15]))
		tcp = p[hl:]
		n = int(binary.BigEndian.Uint16(p[2:])) - hl
	case len(p) >= 40+14 && p[0]>>4 == 6:
		if p[6] != unix.IPPROTO_TCP {
			return k, 0, 0, 0, false
		}
		copy(k.local[:], p[24:40])
		copy(k.remote[:], p[8:24])
		tcp = p[40:]
		n = int(binary.BigEndian.Uint16(p[4:]))
	default:
		return k, 0, 0, 0, false
	}
	k.rport, k.lport = binary.BigEndian.Uint16(tcp[0:]), binary.BigEndian.Uint16(tcp[2:])
	n -= int(tcp[12]>>4) * 4
	return k, binary.BigEndian.Uint32(tcp[4:]), max(n, 0), tcp[13], true
}

// sawSynAck keeps a SYN-ACK's sequence number for its connection's
// registration, and forgets those older than tapSynMaxAge.
func (t *tap) sawSynAck(k flowKey, isn uint32) {
	now := time.Now()
	for len(t.synQ) > 0 {
		sa, ok := t.syn[t.synQ[0]]
		if ok && now.Sub(sa.at) < tapSynMaxAge {
			break
		}
		if ok {
			delete(t.syn, t.synQ[0])
		}
		t.synQ = t.synQ[1:]
	}
	if _, ok := t.syn[k]; !ok {
		if len(t.syn) >= tapSynMax {
			return // connections that never registered (not ours): forget the newest
		}
		t.synQ = append(t.synQ, k)
	}
	t.syn[k] = synAck{isn: isn, at: now}
}
