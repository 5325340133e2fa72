package replay

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineCounter counts the read deadlines set on a real TCP conn.
type deadlineCounter struct {
	net.Conn
	sets atomic.Int32
}

func (d *deadlineCounter) SetReadDeadline(t time.Time) error {
	d.sets.Add(1)
	return d.Conn.SetReadDeadline(t)
}

// TestIdleDeadlineMovedRarely: over loopback TCP, a stream of one-byte
// reads (the server sends the next byte when the client echoes the last,
// so every Read returns one byte) moves the read deadline at most once
// per idle/8 of reading, not once per Read; and when the server falls
// silent, the Read still fails with a deadline error no sooner than the
// idle timeout after the last byte.
func TestIdleDeadlineMovedRarely(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const reads = 60
	served := make(chan error, 1)
	go func() {
		sc, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer sc.Close()
		b := []byte{'x'}
		for range reads {
			if _, err := sc.Write(b); err != nil {
				served <- err
				return
			}
			if _, err := sc.Read(b); err != nil {
				served <- err
				return
			}
		}
		served <- nil
		sc.Read(b) // silent until the client closes
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	const idle = 400 * time.Millisecond
	dc := &deadlineCounter{Conn: nc}
	c := &conn{Conn: dc, set: &connSet{idle: idle, conns: map[*conn]struct{}{}}}
	defer c.Close()
	buf := make([]byte, 16)
	began := time.Now()
	for i := range reads {
		n, err := c.Read(buf)
		if err != nil || n != 1 {
			t.Fatalf("read %d: %d bytes, %v", i, n, err)
		}
		if _, err := c.Write(buf[:1]); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
	}
	took := time.Since(began)
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
	// One move to start, then one per idle/8 of reading at most.
	limit := 1 + int32(took/(idle/8))
	if got := dc.sets.Load(); got > limit || got < 1 {
		t.Errorf("%d read deadlines set over %d reads in %v, want 1 to %d", got, reads, took, limit)
	}
	last := time.Now()
	_, err = c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a silent server: read error %v, want the deadline", err)
	}
	if waited := time.Since(last); waited < idle {
		t.Errorf("the idle deadline fired %v after the last byte, want at least %v", waited, idle)
	}

	// A request deadline earlier than the idle one stays: the Read does
	// not move it (the one set is the request's own).
	dc.sets.Store(0)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err = c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past the request's deadline: read error %v, want the deadline", err)
	}
	if got := dc.sets.Load(); got != 1 {
		t.Errorf("%d read deadlines set with the request's own earlier than the idle one, want 1 (the request's)", got)
	}
}
