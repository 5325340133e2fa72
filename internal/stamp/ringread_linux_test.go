//go:build linux

package stamp

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/trace"
)

// TestPushedBatches: many pushed connections made readable together are
// read in one batch (through the ring where the host has io_uring, one
// recvmsg each where not): every byte reaches its own push in order,
// the peer's close as io.EOF, stamps in order; a read that fills a
// connection's share of the batch's buffer is read on; a push that said
// stop leaves the rest to Read.
func TestPushedBatches(t *testing.T) {
	const conns = 90 // more than a ring's batch
	for _, ring := range []bool{true, false} {
		for _, split := range []bool{false, true} {
			name := fmt.Sprintf("ring=%v/split=%v", ring, split)
			t.Run(name, func(t *testing.T) {
				if ring {
					if r := newRingReader(); r == nil {
						t.Skip("no io_uring here")
					} else {
						r.close()
					}
				}
				pushedBatches(t, conns, ring, split)
			})
		}
	}
}

func pushedBatches(t *testing.T, conns int, ring, split bool) {
	was := useRing
	useRing = ring
	t.Cleanup(func() { useRing = was })
	pollersMu.Lock()
	alive := thePoller != nil
	pollersMu.Unlock()
	if alive {
		t.Fatal("a poller outlived its test: this one would not choose its reads")
	}
	mode := trace.StampKernel
	if split {
		mode = trace.StampKernelOffset
	}
	st := New(mode, 1, 0)
	t.Cleanup(func() { st.Close() })
	const stopper = 7 // its push stops after the first piece
	rxs := make([]*Conn, conns)
	srvs := make([]io.WriteCloser, conns)
	ps := make([]*pushed, conns)
	for i := range conns {
		nc, srv := tcpPair(t)
		rx, err := newConn(nc, split, st)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rx.Close() })
		rxs[i], srvs[i], ps[i] = rx, srv, newPushed()
		fn := ps[i].fn
		if i == stopper {
			fn = func(b []byte, at int64, err error) bool { ps[stopper].fn(b, at, err); return false }
		}
		if !rx.Push(make([]byte, 4096), fn) {
			t.Fatal("Push refused a live connection")
		}
	}
	event := func(i, k int) string { return fmt.Sprintf("data: {\"conn\":%d,\"event\":%d}\n\n", i, k) }
	want := make([]strings.Builder, conns)
	// Each round's bytes reach every socket while the poller is held, so
	// that its next wait finds them all readable at once.
	p := rxs[0].pollConn.p
	for round := range 3 {
		p.mu.Lock()
		for i, srv := range srvs {
			var b strings.Builder
			k := 1
			if i%10 == 0 && round == 1 {
				k = 1500 // ~40 KiB: more than a connection's share of the batch buffer
			}
			for j := range k {
				b.WriteString(event(i, round*10000+j))
			}
			if _, err := io.WriteString(srv, b.String()); err != nil {
				p.mu.Unlock()
				t.Fatal(err)
			}
			want[i].WriteString(b.String())
		}
		// Each socket has its bytes, or the poller, busy with the last
		// round when the lock was taken, read them already (the
		// stopper's may be kept for Read).
		for i, rx := range rxs {
			if i != stopper && !arrived(rx, ps[i], want[i].Len()) {
				p.mu.Unlock()
				t.Fatalf("conn %d: the round's bytes neither queued nor pushed within 10 s", i)
			}
		}
		p.mu.Unlock()
		if round == 2 {
			for i, srv := range srvs {
				if i != stopper {
					srv.Close()
				}
			}
		}
	}
	for i, pu := range ps {
		if i == stopper {
			continue
		}
		pu.wait(t)
		if !errors.Is(pu.err, io.EOF) {
			t.Errorf("conn %d ended with %v, want io.EOF", i, pu.err)
		}
		pu.mu.Lock()
		if got := pu.data.String(); got != want[i].String() {
			t.Errorf("conn %d: pushed %d bytes, want %d", i, len(got), want[i].Len())
		}
		for k := 1; k < len(pu.stamps); k++ {
			if pu.stamps[k] < pu.stamps[k-1] {
				t.Errorf("conn %d: stamp %d before stamp %d", i, k, k-1)
				break
			}
		}
		for _, piece := range pu.pieces {
			// Split: a piece ends at the first event end (a read that
			// filled its buffer may end inside an event).
			if e := strings.Index(piece, "\n\n"); split && e >= 0 && e+2 != len(piece) {
				t.Errorf("conn %d: piece %q holds more than one event", i, piece)
				break
			}
		}
		pu.mu.Unlock()
	}
	// The push that stopped got its first piece; Read has the rest.
	rx := rxs[stopper]
	rx.Unpush()
	srvs[stopper].Close()
	got := ps[stopper].data.String()
	rest, err := io.ReadAll(rx)
	if err != nil {
		t.Fatalf("Read after the push stopped: %v", err)
	}
	if got+string(rest) != want[stopper].String() || !strings.HasPrefix(want[stopper].String(), got) || got == "" {
		t.Errorf("stopped push: pushed %q then read %d bytes, want %d in all", got, len(rest), want[stopper].Len())
	}
	if n := st.Meta().RingReads; ring != (n > 0) {
		t.Errorf("%d reads through the ring, with ring=%v", n, ring)
	}
}

// arrived waits up to 10 s until rx is readable or its push has all of
// the n bytes written to it.
func arrived(rx *Conn, pu *pushed, n int) bool {
	for range 1000 {
		pfd := []unix.PollFd{{Fd: int32(rx.fd), Events: unix.POLLIN}}
		if k, _ := unix.Poll(pfd, 10); k == 1 {
			return true
		}
		pu.mu.Lock()
		got := pu.data.Len()
		pu.mu.Unlock()
		if got >= n {
			return true
		}
	}
	return false
}
