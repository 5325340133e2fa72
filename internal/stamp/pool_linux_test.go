//go:build linux

package stamp

import (
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// TestObserverServesTheNextRun: a run's observer lingers after Close and
// the next run of the process takes it over (the same child), with its
// own CPU count; two runs at once each have their own; one that died is
// not handed on; and the idle one stops once it has lingered.
func TestObserverServesTheNextRun(t *testing.T) {
	useObserver(t, trace.ObserverProcess)
	drainIdleObserver(t)
	a := New(trace.StampKernelOffset, 1, 0)
	if a.obs == nil {
		t.Fatalf("no observer: %s", a.note)
	}
	first := a.obs
	pid := first.cmd.Process.Pid
	b := New(trace.StampKernelOffset, 1, 0) // at once: a child of its own
	if b.obs == nil || b.obs == first {
		t.Fatalf("a concurrent run shares the observer, or has none: %v", b.note)
	}
	second := b.obs
	a.Close()
	b.Close() // one is idle already: this one stops
	waitExited(t, second)
	if !first.reusable() {
		t.Fatal("the first run's observer did not linger")
	}

	c := New(trace.StampKernelOffset, 1, 0)
	if c.obs != first {
		t.Fatalf("the next run started observer pid %d instead of taking over %d", c.obs.cmd.Process.Pid, pid)
	}
	if cpu := c.ObserverCPU(); cpu < 0 || cpu > first.cpuNs() {
		t.Errorf("the next run's observer CPU %d ns is not its own (the child's whole: %d)", cpu, first.cpuNs())
	}
	// A connection of the next run joins it and is observed.
	nc, srv := tcpPair(t)
	rx := c.Wrap(nc, false)
	if rx == nil || rx.obs.s == nil {
		t.Fatalf("the connection did not join the observer taken over: %+v", c.Meta())
	}
	rx.Close()
	srv.Close()

	// A child that died is not handed on.
	first.cmd.Process.Kill()
	<-first.exited
	c.Close()
	d := New(trace.StampKernelOffset, 1, 0)
	if d.obs == nil || d.obs == first {
		t.Fatalf("a dead observer was handed on, or none started: %s", d.note)
	}
	observerLinger = 50 * time.Millisecond
	t.Cleanup(func() { observerLinger = 2 * time.Second })
	lingering := d.obs
	d.Close()
	waitExited(t, lingering)
}

// drainIdleObserver stops the observer an earlier test left idle.
func drainIdleObserver(t *testing.T) {
	if o, _ := takeIdleObserver(); o != nil {
		o.stop()
	}
}

// waitExited waits, bounded, for o's child to exit.
func waitExited(t *testing.T, o *observer) {
	t.Helper()
	select {
	case <-o.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the observer did not exit")
	}
}
