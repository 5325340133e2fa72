//go:build linux

package stamp

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// TestObserverNeedsObserverMain: a program that never called
// ObserverMain starts no observer (its executable would not become one):
// the run reads with kernel stamps and its note says the observer did not
// start and why.
func TestObserverNeedsObserverMain(t *testing.T) {
	useObserver(t, trace.ObserverProcess)
	mainCalled.Store(false)
	t.Cleanup(func() { mainCalled.Store(true) })
	st := New(trace.StampKernelOffset, 1, 0)
	defer st.Close()
	m := st.Meta()
	if st.obs != nil || m.Mode != trace.StampKernel || m.Requested != trace.StampKernelOffset ||
		!strings.Contains(m.Note, "the observer did not start: this program does not call stamp.ObserverMain") {
		t.Fatalf("observer %v, stamps %+v", st.obs != nil, m)
	}
	// Its connections are read as in kernel mode: through recvmsg, whole
	// (a write that sent two events on loopback is one read, not cut).
	nc, srv := tcpPair(t)
	rx := st.Wrap(nc, false)
	if rx == nil {
		t.Fatalf("not read with kernel stamps: %+v", st.Meta())
	}
	defer rx.Close()
	const events = "data: a\n\ndata: b\n\n"
	if _, err := srv.Write([]byte(events)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := rx.Read(buf)
	// A read may lack a kernel stamp while the kernel turns stamping on
	// for the first socket that asked: it is then counted as a fallback.
	if m := st.Meta(); err != nil || string(buf[:n]) != events || m.KernelReads+m.FallbackReads != 1 || m.SplitReads != 0 {
		t.Errorf("read %q (%v); stamps %+v", buf[:n], err, m)
	}
}

// TestForgottenObserverMain starts this test binary as the observer with
// TestMain leaving ObserverMain out: a program that forgot it runs as
// itself and never speaks the observer's protocol. Whether it exits or
// keeps running, the run waits a bounded time, falls back to kernel
// stamps and its note says the observer did not start; the child, a
// kernel-offset run of its own, starts no observer in turn.
func TestForgottenObserverMain(t *testing.T) {
	if mode := os.Getenv(forgetEnv); mode != "" {
		// The child: ObserverMain was not called.
		tapShared.off = true
		st := New(trace.StampKernelOffset, 1, 0)
		defer st.Close()
		if st.obs != nil || st.mode != trace.StampKernel {
			t.Fatalf("a program started as the observer started another: %+v", st.Meta())
		}
		if mode == "silent" {
			time.Sleep(time.Minute) // a program busy with its own work; the client kills it
		}
		return
	}
	useObserver(t, trace.ObserverProcess)
	observerArgs = []string{"-test.run=^TestForgottenObserverMain$"}
	t.Cleanup(func() { observerArgs = nil })
	for _, tc := range []struct{ mode, why string }{
		{"exit", "it exited without a word (exit status 0)"},
		{"silent", "no word within 2s (signal: killed)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Setenv(forgetEnv, tc.mode)
			if tc.mode == "silent" {
				observerStart = 2 * time.Second
				t.Cleanup(func() { observerStart = 10 * time.Second })
			}
			st := New(trace.StampKernelOffset, 1, 0)
			defer st.Close()
			m := st.Meta()
			if st.obs != nil || m.Mode != trace.StampKernel || m.Note != "no arrival observer (packet tap: turned off; process: the observer did not start: "+tc.why+"): kernel stamps" {
				t.Fatalf("observer %v, stamps %+v", st.obs != nil, m)
			}
		})
	}
}

// TestObserverUnderLoad: beside 40 busy streams (8,000 arrivals a
// second), a stream whose reader is late still gets each queued event's
// own arrival: three events written 50 ms apart, read after the third,
// are stamped apart, each before the next one's write began.
func TestObserverUnderLoad(t *testing.T) {
	useObserver(t, trace.ObserverProcess)
	st := New(trace.StampKernelOffset, 1, 0)
	defer st.Close()
	if st.obs == nil {
		t.Fatalf("no observer: %+v", st.Meta())
	}
	const busy = 40
	srvs := make([]net.Conn, busy)
	for i := range srvs {
		nc, srv := tcpPair(t)
		rx, err := newConn(nc, true, st)
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = srv
		go func() { // drains until the test closes the pair
			defer rx.Close()
			buf := make([]byte, 4096)
			for {
				if _, err := rx.Read(buf); err != nil {
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() { // 40 sockets, an event each every 5 ms: 8,000 arrivals a second
		defer close(loaded)
		ev := []byte("data: {\"choices\":[{\"text\":\"x\"}]}\n\n")
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for _, srv := range srvs {
				if _, err := srv.Write(ev); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-loaded }()
	time.Sleep(200 * time.Millisecond)

	nc, srv := tcpPair(t)
	rx, err := newConn(nc, true, st)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	const gap = 50 * time.Millisecond
	before := writeSpaced(t, srv, gap)
	time.Sleep(gap)
	buf := make([]byte, 4096)
	var stamps []int64
	for range 3 {
		if _, err := rx.Read(buf); err != nil {
			t.Fatal(err)
		}
		stamps = append(stamps, rx.Last())
	}
	_, width := st.conv.Offset()
	for i, s := range stamps {
		if s < before[i]-width || (i < 2 && s >= before[i+1]) {
			t.Errorf("event %d stamped %d: want after its write began (%d) and before the next one's (%v)", i, s, before[i], before)
		}
	}
	if st.observedReads.Load() < 2 {
		t.Errorf("%d reads stamped by the observer, want the two queued events' at least", st.observedReads.Load())
	}
}

// TestWatchedPeeked: the bytes a peek saw arrive, from the reader's count
// and the peek's size, without asking the socket for its peek offset.
func TestWatchedPeeked(t *testing.T) {
	w := watched{peekOff: true}
	steps := []struct {
		consumed int64
		m        int
		want     int64
	}{
		{0, 10, 10},   // first peek: from the start
		{0, 5, 15},    // the reader has read nothing: on from the last peek
		{12, 4, 19},   // the reader is behind the last peek: on from it
		{30, 6, 36},   // the reader went past the last peek: from the reader
		{30, 1, 37},   // on from there
		{100, 2, 102}, // far past
	}
	for i, s := range steps {
		if got := w.peeked(s.consumed, s.m); got != s.want {
			t.Fatalf("step %d: peeked(%d, %d) = %d, want %d", i, s.consumed, s.m, got, s.want)
		}
	}
	plain := watched{}
	if got := plain.peeked(40, 7); got != 47 {
		t.Fatalf("without a peek offset: %d, want 47 (the peek starts at the reader)", got)
	}
}
