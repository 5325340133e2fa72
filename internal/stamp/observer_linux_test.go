//go:build linux

package stamp

import (
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
			if st.obs != nil || m.Mode != trace.StampKernel || m.Note != "no arrival observer (the observer did not start: "+tc.why+"): kernel stamps" {
				t.Fatalf("observer %v, stamps %+v", st.obs != nil, m)
			}
		})
	}
}
