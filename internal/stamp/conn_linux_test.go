//go:build linux

package stamp

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// tcpPair dials a loopback listener and returns both ends, closed when
// the test ends.
func tcpPair(t *testing.T) (client, server net.Conn) { return tcpPairOn(t, "127.0.0.1:0") }

// tcpPairOn is tcpPair over a listener on addr.
func tcpPairOn(t *testing.T, addr string) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(); srv.Close() })
	return nc, srv
}

// rxPair dials a loopback listener and returns the client side wrapped
// as a Conn (split or not), the accepted server side and the Source.
func rxPair(t *testing.T, split bool) (*Conn, net.Conn, *Source) {
	t.Helper()
	mode := trace.StampKernel
	if split {
		mode = trace.StampKernelOffset
	}
	st := New(mode, 1, 0) // before the dial: the tap learns a connection from its SYN-ACK
	nc, srv := tcpPair(t)
	rx, err := newConn(nc, split, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close(); srv.Close(); st.Close() })
	return rx, srv, st
}

// observers are kernel-offset's two observers; useObserver makes New
// pick the named one for the rest of the test, skipping it when this
// host cannot have it.
var observers = []string{trace.ObserverTap, trace.ObserverProcess}

func useObserver(t *testing.T, kind string) {
	t.Helper()
	if kind == trace.ObserverTap {
		tp, err := openTap(1)
		if err != nil {
			t.Skipf("no packet tap here: %v", err)
		}
		tp.close()
	}
	tapShared.mu.Lock()
	was := tapShared.off
	tapShared.off = kind != trace.ObserverTap
	tapShared.mu.Unlock()
	t.Cleanup(func() { tapShared.mu.Lock(); tapShared.off = was; tapShared.mu.Unlock() })
}

// writeSpaced writes three SSE events gap apart and returns the Mono time
// before each write.
func writeSpaced(t *testing.T, srv net.Conn, gap time.Duration) [3]int64 {
	t.Helper()
	var before [3]int64
	for i := range 3 {
		if i > 0 {
			time.Sleep(gap)
		}
		before[i] = clock.Mono()
		if _, err := srv.Write([]byte("data: {\"choices\":[{\"text\":\"x\"}]}\n\n")); err != nil {
			t.Fatal(err)
		}
	}
	return before
}

// TestKernelOffsetSplitsQueuedEvents: three events that all queued before
// the reader came are read one by one in kernel-offset mode, each stamped
// with its own arrival (the observer's record; the kernel's stamps of the
// merged queue are all the last one's): after its write began, before the
// read returned, in the writes' order. Kernel mode reads them in one go
// with the last one's stamp.
func TestKernelOffsetSplitsQueuedEvents(t *testing.T) {
	const gap = 50 * time.Millisecond
	const ev = len("data: {\"choices\":[{\"text\":\"x\"}]}\n\n")
	for _, kind := range observers {
		t.Run("kernel-offset/"+kind, func(t *testing.T) {
			useObserver(t, kind)
			rx, srv, st := rxPair(t, true)
			before := writeSpaced(t, srv, gap)
			time.Sleep(gap) // every event queued before the first read
			buf := make([]byte, 4096)
			var stamps []int64
			for range 3 {
				n, err := rx.Read(buf)
				if err != nil || n != ev {
					t.Fatalf("read %d bytes (%v), want one event of %d", n, err, ev)
				}
				stamps = append(stamps, rx.Last())
				if after := clock.Mono(); stamps[len(stamps)-1] > after {
					t.Errorf("stamp %d after the read returned (%d)", stamps[len(stamps)-1], after)
				}
			}
			for i, s := range stamps {
				_, width := st.conv.Offset()
				if s < before[i]-width {
					t.Errorf("event %d stamped %d, before its write began (%d)", i, s, before[i])
				}
				if i > 0 && s <= stamps[i-1] {
					t.Errorf("events %d and %d stamped %v apart; they were written %v apart", i-1, i, time.Duration(s-stamps[i-1]), gap)
				}
				// The observer's record carries the kernel's stamp of the
				// arrival, which the next write cannot precede.
				if i < 2 && s >= before[i+1] {
					t.Errorf("event %d stamped %d, after event %d's write began (%d)", i, s, i+1, before[i+1])
				}
			}
			// One recvmsg brought all three; the second and third came from
			// what it kept.
			if st.kernelReads.Load() != 1 || st.fallbackReads.Load() != 0 || st.splitReads.Load() != 2 || st.observedReads.Load() < 2 {
				t.Errorf("kernel reads %d, fallback %d, split %d, observed %d; want 1, 0, 2, at least 2", st.kernelReads.Load(), st.fallbackReads.Load(),
					st.splitReads.Load(), st.observedReads.Load())
			}
			if m := st.Meta(); m.Mode != trace.StampKernelOffset || m.Observer != kind || (kind == trace.ObserverProcess) != (m.ObserverPriority != "") ||
				m.RealMinusMonoNs == 0 || m.Note != "" {
				t.Errorf("run stamps %+v", m)
			} else {
				t.Logf("observer %s, priority: %s", m.Observer, m.ObserverPriority)
			}
			srv.Close()
			if n, err := rx.Read(buf); n != 0 || err != io.EOF {
				t.Errorf("after the peer closed: %d, %v; want EOF", n, err)
			}
		})
	}
	t.Run("kernel", func(t *testing.T) {
		rx, srv, st := rxPair(t, false)
		before := writeSpaced(t, srv, gap)
		time.Sleep(gap)
		buf := make([]byte, 4096)
		n, err := rx.Read(buf)
		if err != nil || n != 3*ev {
			t.Fatalf("read %d bytes (%v), want the three events at once (%d)", n, err, 3*ev)
		}
		if s := rx.Last(); s < before[2] || s > clock.Mono() {
			t.Errorf("one read's stamp %d: want the last segment's, after %d", s, before[2])
		}
		// A read may lack a kernel stamp while the kernel turns stamping
		// on for the first socket that asked: it is a fallback then.
		if st.kernelReads.Load()+st.fallbackReads.Load() != 1 || st.splitReads.Load() != 0 {
			t.Errorf("kernel reads %d, fallback %d, split %d", st.kernelReads.Load(), st.fallbackReads.Load(), st.splitReads.Load())
		}
	})
}

// TestKernelOffsetSmallReads: a reader whose buffer is smaller than an
// event gets the queued bytes in order and whole, across the kept
// remainder and the socket, and every piece's stamp is no later than the
// one after it.
func TestKernelOffsetSmallReads(t *testing.T) {
	rx, srv, _ := rxPair(t, true)
	want := "data: a\n\ndata: bb\n\ndata: ccc\n\n"
	if _, err := srv.Write([]byte(want)); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(10 * time.Millisecond); srv.Write([]byte("data: d\n\n")); srv.Close() }()
	want += "data: d\n\n"
	var got []byte
	var last int64
	buf := make([]byte, 5)
	for {
		n, err := rx.Read(buf)
		got = append(got, buf[:n]...)
		if s := rx.Last(); s < last {
			t.Errorf("stamp %d after %d", s, last)
		} else {
			last = s
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(buf[:n], []byte("\n\n")) > 1 {
			t.Errorf("one read returned %q: more than one event", buf[:n])
		}
	}
	if string(got) != want {
		t.Errorf("read %q, want %q", got, want)
	}
}

// TestStampReadAllocs: a read allocates nothing in any mode, whether it
// finds one event, several queued (kept and handed out one by one) or a
// partial one.
func TestStampReadAllocs(t *testing.T) {
	for _, mode := range []string{trace.StampKernel, trace.StampKernelOffset} {
		t.Run(mode, func(t *testing.T) {
			rx, srv, _ := rxPair(t, mode == trace.StampKernelOffset)
			events := []byte("data: {\"choices\":[{\"text\":\"x\"}]}\n\ndata: {\"choices\":[{\"text\":\"y\"}]}\n\ndata: {\"cho")
			rest := []byte("ices\":[]}\n\n")
			buf := make([]byte, 4096)
			round := func() {
				if _, err := srv.Write(events); err != nil {
					t.Fatal(err)
				}
				if _, err := srv.Write(rest); err != nil {
					t.Fatal(err)
				}
				for got := 0; got < len(events)+len(rest); {
					n, err := rx.Read(buf)
					if err != nil {
						t.Fatal(err)
					}
					got += n
				}
			}
			// The kept remainder's buffer grows once, to the largest
			// remainder: both writes read at once (a loaded machine can
			// read them so in any round).
			if _, err := srv.Write(append(slices.Clip(events), rest...)); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < len(events)+len(rest); {
				n, err := rx.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
			round()
			// AllocsPerRun counts the whole process's allocations, and
			// other goroutines (the observer's watch among them) allocate
			// now and then: on a loaded machine one can fall into a
			// measurement. An allocation of the reads shows in every
			// measurement, so the least of five is theirs.
			least := math.Inf(1)
			for range 5 {
				least = min(least, testing.AllocsPerRun(50, round))
			}
			if least != 0 {
				t.Errorf("%v allocations per round of reads (the least of five measurements)", least)
			}
		})
	}
}

// TestRxConnDeadline: a read deadline interrupts a read that waits in the
// netpoller, as on a plain conn (replay's idle timeout relies on it).
func TestRxConnDeadline(t *testing.T) {
	rx, _, _ := rxPair(t, true)
	rx.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := rx.Read(make([]byte, 64))
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
}

// TestEventEnd: a cut after the first blank line of either style.
func TestEventEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"data: a\n\ndata: b\n\n", 9}, {"data: a\r\n\r\nx", 11}, {"HTTP/1.1 200 OK\r\nA: b\r\n\r\n1a\r\ndata", 25},
		{"data: a\n", 8}, {"", 0}, {"\n\n", 2}, {"a\r\n\n", 4},
		// The chunk's end goes with the event.
		{"data: a\n\n\r\n6\r\ndata", 11}, {"data: a\r\n\r\n\r\nx", 13}, {"data: a\n\n\r", 9}, {"data: a\n\n\r\n", 11},
	} {
		if got := eventEnd([]byte(tc.in)); got != tc.want {
			t.Errorf("eventEnd(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	// Every string of up to 9 bytes over "a\r\n" is cut where the rule,
	// checked at each byte, says.
	var walk func(p []byte)
	walk = func(p []byte) {
		if got, want := eventEnd(p), eventEndAt(p); got != want {
			t.Fatalf("eventEnd(%q) = %d, want %d", p, got, want)
		}
		if len(p) < 9 {
			for _, b := range []byte("a\r\n") {
				walk(append(p, b))
			}
		}
	}
	walk(nil)
}

// eventEndAt is eventEnd's rule checked at every byte in turn.
func eventEndAt(p []byte) int {
	for i := 1; i < len(p); i++ {
		if p[i] == '\n' && (p[i-1] == '\n' || (i >= 3 && string(p[i-3:i]) == "\r\n\r")) {
			if i+2 < len(p) && p[i+1] == '\r' && p[i+2] == '\n' {
				return i + 3
			}
			return i + 1
		}
	}
	return len(p)
}

// TestObserverGoneFallsBack: when the observer process dies, a connection
// opened before it and one opened after still read every byte in order
// with kernel stamps, the later one is counted as not observed and the
// run's note says so.
func TestObserverGoneFallsBack(t *testing.T) {
	useObserver(t, trace.ObserverProcess)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	st := New(trace.StampKernelOffset, 1, 0)
	defer st.Close()
	if st.mode != trace.StampKernelOffset || st.obs == nil {
		t.Fatalf("mode %s, observer %v: %s", st.mode, st.obs, st.note)
	}
	pair := func() (*Conn, net.Conn) {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		srv, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		rx, err := newConn(nc, true, st)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rx.Close(); srv.Close() })
		return rx, srv
	}
	before, srvBefore := pair()
	if before.obs.s == nil {
		t.Fatal("the first connection did not join the observer")
	}
	// The kernel turns receive stamping on for the whole host from a work
	// queue when the first socket asks for it: on a busy machine the first
	// segments can arrive before it has, unstamped (counted as fallback
	// reads, which is right). Exchange bytes until a read is stamped, so
	// the reads below find it on.
	for i := 0; st.kernelReads.Load() == 0; i++ {
		if i == 10000 {
			t.Fatal("no read kernel-stamped after 10000 exchanges")
		}
		if _, err := srvBefore.Write([]byte("\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := before.Read(make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		if st.kernelReads.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	st.obs.cmd.Process.Kill()
	<-st.obs.exited
	after, srvAfter := pair()
	if after.obs.s != nil || st.observeErrs.Load() != 1 {
		t.Fatalf("after the observer died: registered %v, %d connections not observed", after.obs.s != nil, st.observeErrs.Load())
	}
	if m := st.Meta(); !strings.Contains(m.Note, "1 connections could not join the arrival observer") {
		t.Errorf("note %q", m.Note)
	}
	const events = "data: a\n\ndata: b\n\n"
	for _, c := range []struct {
		rx  *Conn
		srv net.Conn
	}{{before, srvBefore}, {after, srvAfter}} {
		kernel := st.kernelReads.Load()
		if _, err := c.srv.Write([]byte(events)); err != nil {
			t.Fatal(err)
		}
		var got []byte
		buf := make([]byte, 64)
		for len(got) < len(events) {
			n, err := c.rx.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
		if string(got) != events || st.kernelReads.Load() == kernel {
			t.Errorf("read %q with %d kernel-stamped reads", got, st.kernelReads.Load()-kernel)
		}
	}
}

// TestConnOutlivesObserver: a connection still open when the run stops
// its observer keeps reading (the shared table stays mapped until the
// last such connection closes) and closes cleanly; a read after Close
// fails, even with bytes kept from before.
func TestConnOutlivesObserver(t *testing.T) {
	for _, kind := range observers {
		t.Run(kind, func(t *testing.T) { useObserver(t, kind); connOutlivesObserver(t) })
	}
}

func connOutlivesObserver(t *testing.T) {
	rx, srv, st := rxPair(t, true)
	if _, err := srv.Write([]byte("data: a\n\ndata: b\n\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := rx.Read(buf); err != nil || string(buf[:n]) != "data: a\n\n" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	st.Close()
	if n, err := rx.Read(buf); err != nil || string(buf[:n]) != "data: b\n\n" {
		t.Fatalf("read after the observer stopped: %q, %v", buf[:n], err)
	}
	if _, err := srv.Write([]byte("data: c\n\ndata: d\n\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := rx.Read(buf); err != nil || string(buf[:n]) != "data: c\n\n" {
		t.Fatalf("read after the observer stopped: %q, %v", buf[:n], err)
	}
	if err := rx.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := rx.Read(buf); err == nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %d, %v", n, err)
	}
}
