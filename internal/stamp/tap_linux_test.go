//go:build linux

package stamp

import (
	"encoding/binary"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/trace"
)

// TestTapStampIsTheKernels: for bytes a read takes as they come, one
// segment each, the tap has a record of their arrival no later than the
// stamp the reader's recvmsg got: the same receive stamp where the
// device set it, else the tap's own, taken before IP and TCP ran.
func TestTapStampIsTheKernels(t *testing.T) {
	useObserver(t, trace.ObserverTap)
	rx, srv, st := rxPair(t, true)
	if rx.flow == nil {
		t.Fatalf("the tap did not take the connection up: %+v", st.Meta())
	}
	buf := make([]byte, 256)
	for i := range 20 {
		if _, err := srv.Write([]byte("data: {\"i\":" + strings.Repeat("7", i) + "}\n\n")); err != nil {
			t.Fatal(err)
		}
		n, err := rx.Read(buf)
		if err != nil || n == 0 {
			t.Fatalf("read %d: %v", n, err)
		}
		kernel, ok := rx.stamp()
		if !ok {
			continue // the kernel turning stamps on for the first socket
		}
		tapped, ok := rx.tap.firstAt(rx.flow, rx.off)
		if !ok || tapped > kernel {
			t.Fatalf("event %d: tap %d (%v), kernel %d", i, tapped, ok, kernel)
		}
		if i == 19 {
			t.Logf("tap stamp %d ns before the kernel's", kernel-tapped)
		}
	}
}

// TestTapKeepsEachSegmentsStamp: a reader that comes after many events
// queued, beside other busy connections, gets each event stamped with
// its own segment's arrival: in order, after its write began, before the
// next one's.
func TestTapKeepsEachSegmentsStamp(t *testing.T) {
	useObserver(t, trace.ObserverTap)
	rx, srv, st := rxPair(t, true)
	srv.(*net.TCPConn).SetNoDelay(true)
	const events = 30
	var before [events]int64
	for i := range events {
		before[i] = monoNow()
		if _, err := srv.Write([]byte("data: {\"x\":1}\n\n")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	buf := make([]byte, 4096)
	var last int64
	for i := range events {
		n, err := rx.Read(buf)
		if err != nil || n != len("data: {\"x\":1}\n\n") {
			t.Fatalf("read %d: %d bytes, %v", i, n, err)
		}
		s := rx.Last()
		_, width := st.conv.Offset()
		if s < before[i]-width || (i+1 < events && s >= before[i+1]+width) || s <= last {
			t.Fatalf("event %d stamped %d: written at %d, next at %d, previous stamp %d", i, s, before[i], before[min(i+1, events-1)], last)
		}
		last = s
	}
	if m := st.Meta(); m.SplitReads == 0 || m.ObservedReads < events-1 || m.TapDrops != 0 || m.Observer != trace.ObserverTap {
		t.Errorf("stamps %+v", m)
	}
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// TestTapFilter: the ring gets a connection's SYN, its SYN-ACK and the
// segments that carry bytes, never its bare acknowledgements, and of each
// its headers only, no byte of its payload.
func TestTapFilter(t *testing.T) {
	useObserver(t, trace.ObserverTap)
	tp, err := openTap(1)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.close()
	nc, srv := tcpPair(t)
	for range 5 {
		srv.Write([]byte("0123456789"))
		b := make([]byte, 10)
		if _, err := nc.Read(b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // each its own segment, acknowledged
	}
	nc.Write([]byte("hello"))
	time.Sleep(20 * time.Millisecond)
	client := nc.LocalAddr().(*net.TCPAddr).Port
	var syn, synAck, toClient, toServer, other int
	for i := range tp.frames {
		fr := tp.frame(i)
		hdr := (*unix.Tpacket2Hdr)(unsafe.Pointer(&fr[0]))
		if atomic.LoadUint32(&hdr.Status)&unix.TP_STATUS_USER == 0 {
			break
		}
		k, _, n, flags, ok := parseSegment(fr[hdr.Net:][:hdr.Snaplen])
		switch {
		case !ok || (int(k.lport) != client && int(k.rport) != client):
			continue // another connection on this host
		case flags&tcpSyn != 0 && flags&tcpAck != 0:
			synAck++
		case flags&tcpSyn != 0:
			syn++
		case int(hdr.Len)-int(hdr.Snaplen) != n:
			t.Errorf("a segment of %d bytes kept %d of %d: want its headers only", n, hdr.Snaplen, hdr.Len)
		case n == 0:
			other++
		case int(k.lport) == client:
			toClient++
		default:
			toServer++
		}
	}
	if syn != 1 || synAck != 1 || toClient != 5 || toServer != 1 || other != 0 {
		t.Errorf("SYN %d, SYN-ACK %d, segments with bytes to the client %d, to the server %d, others %d; want 1, 1, 5, 1, 0", syn, synAck, toClient, toServer, other)
	}
}

// TestTapRingFull: a ring that overflows counts its drops in the run's
// stamps; the connection whose segments it lost reads every byte, and
// once the ring has room again its events get their own stamps again.
func TestTapRingFull(t *testing.T) {
	useObserver(t, trace.ObserverTap)
	small, err := openTap(1) // 409 frames, not the poller's to drain
	if err != nil {
		t.Fatal(err)
	}
	tapShared.mu.Lock()
	if tapShared.t != nil {
		tapShared.mu.Unlock()
		small.close()
		t.Skip("another run holds the process's tap")
	}
	tapShared.t = small
	tapShared.mu.Unlock()
	rx, srv, st := rxPair(t, true)
	// 300 more connections: a SYN and a SYN-ACK each, 600 frames.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for range 300 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	const ev = "data: {\"x\":1}\n\n"
	buf := make([]byte, len(ev))
	readSpaced := func(n int) []int64 {
		for range n {
			if _, err := srv.Write([]byte(ev)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		var stamps []int64
		for range n {
			if n, err := rx.Read(buf); err != nil || n != len(ev) {
				t.Fatalf("read %d, %v", n, err)
			}
			stamps = append(stamps, rx.Last())
		}
		return stamps
	}
	// Lost in the full ring: kernel stamps, the three events all read.
	readSpaced(3)
	m := st.Meta()
	if m.TapDrops == 0 || !strings.Contains(m.Note, "the packet tap's ring was full") {
		t.Fatalf("stamps %+v", m)
	}
	// With room again: spaced events, read late, stamped apart but the
	// first, which follows the gap (no record: it gets the next's).
	observed := st.observedReads.Load()
	stamps := readSpaced(4)
	if stamps[0] > stamps[1] || stamps[2]-stamps[1] < int64(5*time.Millisecond) || stamps[3]-stamps[2] < int64(5*time.Millisecond) || st.observedReads.Load()-observed < 3 {
		t.Errorf("after the drops: stamps %v, %d observed", stamps, st.observedReads.Load()-observed)
	}
}

// TestFlowArrived: byte offsets from sequence numbers, across the 4 GiB
// wrap; a retransmission changes nothing; a gap (a lost record) resyncs
// without a record of its own.
func TestFlowArrived(t *testing.T) {
	isn := uint32(0xffffff00)
	f := &flow{isn: isn}
	seq := isn + 1
	f.arrived(seq, 100, 10) // bytes 0-99
	f.arrived(seq+100, 200, 20)
	f.arrived(seq, 100, 30) // again: nothing new
	f.arrived(seq+500, 100, 40)
	f.arrived(seq+600, 50, 50)
	for _, c := range []struct {
		end  int64
		at   int64
		have bool
	}{{1, 10, true}, {100, 10, true}, {101, 20, true}, {300, 20, true}, {301, 50, true}, {600, 50, true}, {650, 50, true}, {651, 0, false}} {
		if at, ok := f.firstAt(c.end); at != c.at || ok != c.have {
			t.Errorf("firstAt(%d) = %d, %v; want %d, %v", c.end, at, ok, c.at, c.have)
		}
	}
	if f.end != 650 {
		t.Errorf("end %d, want 650", f.end)
	}
	// 5 GiB on: the offset keeps counting past the wrap.
	f = &flow{isn: 7, end: 5 << 30}
	base := int64(5 << 30)
	f.arrived(uint32(7+1+base), 10, 1)
	if f.end != 5<<30+10 {
		t.Errorf("end %d, want %d", f.end, 5<<30+10)
	}
}

// TestParseSegment reads IPv4 and IPv6 headers.
func TestParseSegment(t *testing.T) {
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], 8000)
	binary.BigEndian.PutUint16(tcp[2:], 40000)
	binary.BigEndian.PutUint32(tcp[4:], 12345)
	tcp[12], tcp[13] = 5<<4, tcpAck
	v4 := append([]byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, unix.IPPROTO_TCP, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}, tcp...)
	binary.BigEndian.PutUint16(v4[2:], uint16(20+20+33))
	k, seq, n, flags, ok := parseSegment(v4)
	if !ok || seq != 12345 || n != 33 || flags != tcpAck || k.lport != 40000 || k.rport != 8000 ||
		!net.IP(k.local[:]).Equal(net.IPv4(10, 0, 0, 2)) || !net.IP(k.remote[:]).Equal(net.IPv4(10, 0, 0, 1)) {
		t.Errorf("IPv4: %+v %d %d %x %v", k, seq, n, flags, ok)
	}
	v6 := make([]byte, 40)
	v6[0], v6[6] = 6<<4, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(v6[4:], 20+7)
	v6[23], v6[39] = 1, 2
	v6 = append(v6, tcp...)
	k, _, n, _, ok = parseSegment(v6)
	if !ok || n != 7 || k.local[15] != 2 || k.remote[15] != 1 {
		t.Errorf("IPv6: %+v %d %v", k, n, ok)
	}
	if _, _, _, _, ok := parseSegment(v4[:30]); ok {
		t.Error("a cut IPv4 header parsed")
	}
	udp := append([]byte(nil), v4...)
	udp[9] = unix.IPPROTO_UDP
	if _, _, _, _, ok := parseSegment(udp); ok {
		t.Error("UDP parsed as TCP")
	}
}

// TestTapIPv6: over IPv6 too, events queued before a late read each get
// their own arrival.
func TestTapIPv6(t *testing.T) {
	useObserver(t, trace.ObserverTap)
	st := New(trace.StampKernelOffset, 1, 0)
	defer st.Close()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ln.Close()
	nc, srv := tcpPairOn(t, "[::1]:0")
	rx := st.Wrap(nc, false)
	if rx == nil || rx.flow == nil {
		t.Fatalf("not tapped: %+v", st.Meta())
	}
	defer rx.Close()
	before := writeSpaced(t, srv, 20*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	buf := make([]byte, 4096)
	for i := range 3 {
		if _, err := rx.Read(buf); err != nil {
			t.Fatal(err)
		}
		_, width := st.conv.Offset()
		if s := rx.Last(); s < before[i]-width || (i < 2 && s >= before[i+1]) {
			t.Errorf("event %d stamped %d: written at %v", i, s, before)
		}
	}
}

// TestTapMissedSynAck: a connection whose SYN-ACK the tap did not see
// (dialed before the tap opened) reads every byte with kernel stamps,
// and the run's note counts it.
func TestTapMissedSynAck(t *testing.T) {
	useObserver(t, trace.ObserverTap)
	nc, srv := tcpPair(t)
	st := New(trace.StampKernelOffset, 1, 0)
	defer st.Close()
	rx := st.Wrap(nc, false)
	if rx == nil || rx.flow != nil {
		t.Fatalf("wrapped %v, tapped %v", rx != nil, rx != nil && rx.flow != nil)
	}
	defer rx.Close()
	const events = "data: a\n\ndata: b\n\n"
	if _, err := srv.Write([]byte(events)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 64)
	for len(got) < len(events) {
		n, err := rx.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if m := st.Meta(); string(got) != events || m.ObservedReads != 0 || m.Observer != trace.ObserverTap ||
		!strings.Contains(m.Note, "the packet tap saw no SYN-ACK from the address dialed for 1 connections") {
		t.Errorf("read %q; stamps %+v", got, m)
	}
}

// TestTapFlowsOfOnePort: connections that share a local port (to
// different servers) each get their own segments, and one that leaves
// leaves the others found.
func TestTapFlowsOfOnePort(t *testing.T) {
	tp := &tap{byPort: make([]*flow, 1<<16), syn: map[flowKey]synAck{}}
	var flows []*flow
	for i := range 3 {
		k := flowKey{lport: 40000, rport: uint16(8000 + i)}
		copy(k.local[:], net.IPv4(127, 0, 0, 1))
		copy(k.remote[:], net.IPv4(127, 0, 0, 2))
		flows = append(flows, tp.add(k, uint32(1000*i)))
	}
	seg := func(i, n int) []byte {
		p := make([]byte, 40)
		p[0], p[9] = 0x45, unix.IPPROTO_TCP
		binary.BigEndian.PutUint16(p[2:], uint16(40+n))
		copy(p[12:16], net.IPv4(127, 0, 0, 2).To4())
		copy(p[16:20], net.IPv4(127, 0, 0, 1).To4())
		binary.BigEndian.PutUint16(p[20:], uint16(8000+i))
		binary.BigEndian.PutUint16(p[22:], 40000)
		binary.BigEndian.PutUint32(p[24:], uint32(1000*i+1))
		p[32], p[33] = 5<<4, tcpAck
		return p
	}
	for i := range 3 {
		tp.segment(seg(i, 10*(i+1)), int64(i+1))
	}
	for i, f := range flows {
		if at, ok := f.firstAt(1); f.end != int64(10*(i+1)) || !ok || at != int64(i+1) {
			t.Errorf("flow %d: end %d, first arrival %d %v", i, f.end, at, ok)
		}
	}
	tp.unregister(flows[1])
	tp.segment(seg(1, 50), 9)
	tp.segment(seg(2, 50), 9)
	if flows[1].end != 20 || flows[2].end != 50 || tp.lookup(&flows[0].key) != flows[0] || tp.lookup(&flows[1].key) != nil {
		t.Errorf("after one left: ends %d, %d, %d", flows[0].end, flows[1].end, flows[2].end)
	}
}

// TestParseSegmentAllocs: the drain parses a segment without allocating.
func TestParseSegmentAllocs(t *testing.T) {
	p := make([]byte, 40)
	p[0], p[9], p[32] = 0x45, unix.IPPROTO_TCP, 5<<4
	binary.BigEndian.PutUint16(p[2:], 50)
	if n := testing.AllocsPerRun(100, func() { parseSegment(p) }); n != 0 {
		t.Errorf("%v allocations per segment", n)
	}
}
