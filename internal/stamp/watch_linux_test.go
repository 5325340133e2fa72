//go:build linux

package stamp

import (
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/trace"
)

// TestOneCPUNoObserver: a client that may run on one CPU only (taskset -c
// 0) starts no observer process, which would take that CPU from its
// reader: it gets kernel stamps and the run's note says why. The packet
// tap has no CPU of its own, so with it the run stays in kernel-offset.
func TestOneCPUNoObserver(t *testing.T) {
	for _, kind := range observers {
		t.Run(kind, func(t *testing.T) {
			useObserver(t, kind)
			oneCPU(t, kind)
		})
	}
}

func oneCPU(t *testing.T, kind string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Skipf("no affinity here: %v", err)
	}
	for cpu := range 1024 {
		if was.IsSet(cpu) {
			one.Set(cpu)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Skipf("cannot pin this thread: %v", err)
	}
	st := New("", 1, 0)
	unix.SchedSetaffinity(0, &was)
	defer st.Close()
	m := st.Meta()
	switch kind {
	case trace.ObserverTap:
		if m.Mode != trace.StampKernelOffset || m.Observer != trace.ObserverTap || m.Note != "" {
			t.Fatalf("stamps %+v", m)
		}
	default:
		if st.obs != nil || m.Mode != trace.StampKernel || m.Observer != "" || !strings.Contains(m.Note, "one CPU") {
			t.Fatalf("observer %v, stamps %+v", st.obs != nil, m)
		}
	}
	if was.Count() > 1 {
		st2 := New("", 1, 0)
		defer st2.Close()
		if m := st2.Meta(); m.Mode != trace.StampKernelOffset || m.Observer != kind {
			t.Errorf("on %d CPUs: stamps %+v", was.Count(), m)
		}
	}
}

// TestWatchSwitchesObserverOff: an observer that takes more of the
// client's CPU than it may is switched off after the strikes the watch
// allows; the connection it observed reads on (kernel stamps, no error),
// a connection opened after does not try to join it, and the run's stamp
// metadata says when and why.
func TestWatchSwitchesObserverOff(t *testing.T) {
	useObserver(t, trace.ObserverProcess)
	oldEvery, oldBusy := watchEvery, maxObserverBusy
	watchEvery, maxObserverBusy = 20*time.Millisecond, -1 // any CPU at all is too much
	t.Cleanup(func() { watchEvery, maxObserverBusy = oldEvery, oldBusy })

	rx, srv, st := rxPair(t, true)
	if st.obs == nil {
		t.Skipf("no observer here: %+v", st.Meta())
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.offNs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not switch the observer off within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := st.Meta()
	if m.ObserverOffNs <= 0 || !strings.Contains(m.Note, "switched off") || !strings.Contains(m.Note, "could not keep up") {
		t.Errorf("stamps %+v", m)
	}
	const ev = "data: x\n\n"
	if _, err := srv.Write([]byte(ev)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := rx.Read(buf); err != nil || string(buf[:n]) != ev {
		t.Fatalf("read after the switch-off: %q, %v", buf[:n], err)
	}
	// A connection opened after the switch-off reads with kernel stamps
	// and is not counted as one that failed to join.
	nc, peer := tcpPair(t)
	c2 := st.Wrap(nc, false)
	if c2 == nil {
		t.Fatal("not wrapped")
	}
	defer c2.Close()
	if c2.obs.s != nil || st.observeErrs.Load() != 0 {
		t.Errorf("joined %v, join errors %d", c2.obs.s != nil, st.observeErrs.Load())
	}
	peer.Write([]byte(ev))
	if n, err := c2.Read(buf); err != nil || string(buf[:n]) != ev {
		t.Fatalf("read on the later connection: %q, %v", buf[:n], err)
	}
	srv.Close()
	if n, err := rx.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("after the peer closed: %d, %v; want EOF", n, err)
	}
	// Its CPU is still known after it ended (the health of the run).
	if st.ObserverCPU() <= 0 {
		t.Errorf("observer CPU after the switch-off: %d", st.ObserverCPU())
	}
}

func TestBusyShare(t *testing.T) {
	for _, c := range []struct {
		cpu  int64
		wall time.Duration
		want float64
	}{{500e6, time.Second, 0.5}, {1e9, time.Second, 1}, {1, 0, 0}} {
		if got := busyShare(c.cpu, c.wall); got != c.want {
			t.Errorf("busyShare(%d, %v) = %g, want %g", c.cpu, c.wall, got, c.want)
		}
	}
}
