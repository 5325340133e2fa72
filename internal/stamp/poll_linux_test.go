//go:build linux

package stamp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bound is how long a test waits for something that should happen at once.
const bound = 10 * time.Second

// readAll reads rx until it has want bytes or an error, within bound.
func readAll(t *testing.T, rx net.Conn, want int) ([]byte, error) {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for len(got) < want {
			n, err := rx.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				done <- res{got, err}
				return
			}
		}
		done <- res{got, nil}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(bound):
		t.Fatalf("no read returned within %v", bound)
		return nil, nil
	}
}

// TestPollConnReadsLaterAndFullBuffers: bytes that come after the Read
// began are read once the poller sees their edge, and a read that fills
// the buffer is followed at once by the next (no new edge announces the
// rest of a large write).
func TestPollConnReadsLaterAndFullBuffers(t *testing.T) {
	for _, split := range []bool{false, true} {
		rx, srv, st := rxPair(t, split)
		go func() {
			time.Sleep(20 * time.Millisecond)
			srv.Write([]byte("data: a\n\n"))
		}()
		got, err := readAll(t, rx, 9)
		if err != nil || string(got) != "data: a\n\n" {
			t.Fatalf("split %v: read %q, %v", split, got, err)
		}
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, no event end
		if _, err := srv.Write(big); err != nil {
			t.Fatal(err)
		}
		got, err = readAll(t, rx, len(big))
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("split %v: read %d of %d bytes, %v", split, len(got), len(big), err)
		}
		if m := st.Meta(); m.KernelReads == 0 || m.FallbackReads != 0 {
			t.Errorf("split %v: %d kernel-stamped reads, %d by the clock; want all by the kernel", split, m.KernelReads, m.FallbackReads)
		}
	}
}

// TestPollConnEOFAfterLastBytes: a server that writes and closes at once
// sends its last bytes and its FIN together; the read after the bytes
// must see the end, not wait for an edge that already came.
func TestPollConnEOFAfterLastBytes(t *testing.T) {
	for range 20 {
		rx, srv, _ := rxPair(t, false)
		srv.Write([]byte("data: last\n\n"))
		srv.Close()
		got, err := readAll(t, rx, 1<<20)
		if string(got) != "data: last\n\n" || err != io.EOF {
			t.Fatalf("read %q, %v; want the bytes then io.EOF", got, err)
		}
	}
}

// TestPollConnPeerReset: a reset peer fails the read with ECONNRESET, as
// net's own reads report it.
func TestPollConnPeerReset(t *testing.T) {
	rx, srv, _ := rxPair(t, false)
	srv.(*net.TCPConn).SetLinger(0)
	srv.Close()
	_, err := readAll(t, rx, 1)
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read from a reset peer: %v, want ECONNRESET in a net.OpError", err)
	}
}

// TestPollConnDeadlines: a deadline that passes wakes a blocked Read with
// a timeout; one already past fails at once; clearing it lets the next
// read wait for bytes again.
func TestPollConnDeadlines(t *testing.T) {
	rx, srv, _ := rxPair(t, false)
	rx.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_, err := readAll(t, rx, 1)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	srv.Write([]byte("x"))
	rx.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := rx.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with a past deadline and bytes waiting: %v, want a timeout", err)
	}
	rx.SetReadDeadline(time.Time{})
	got, err := readAll(t, rx, 1)
	if err != nil || string(got) != "x" {
		t.Fatalf("read after the deadline was cleared: %q, %v", got, err)
	}
	// A later deadline replaces an earlier one: the timer of the first
	// must not fail the read.
	rx.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	rx.SetReadDeadline(time.Now().Add(bound))
	go func() {
		time.Sleep(100 * time.Millisecond)
		srv.Write([]byte("y"))
	}()
	if got, err := readAll(t, rx, 1); err != nil || string(got) != "y" {
		t.Fatalf("read after a deadline was moved later: %q, %v", got, err)
	}
}

// TestPollConnCloseWakesRead: Close from another goroutine ends a blocked
// Read with net.ErrClosed, and a second Close says it was closed.
func TestPollConnCloseWakesRead(t *testing.T) {
	rx, _, _ := rxPair(t, false)
	errc := make(chan error, 1)
	go func() {
		_, err := rx.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := rx.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(bound):
		t.Fatalf("Close did not wake the blocked read within %v", bound)
	}
	if err := rx.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
}

// TestPollConnLargeWrite: a write larger than the socket's buffers waits
// for room while the peer reads slowly, and every byte arrives; a write
// deadline ends a write the peer never reads.
func TestPollConnLargeWrite(t *testing.T) {
	rx, srv, _ := rxPair(t, false)
	body := bytes.Repeat([]byte("image bytes "), 1<<20) // 12 MiB
	var got []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(50 * time.Millisecond) // let the buffers fill first
		srv.SetReadDeadline(time.Now().Add(bound))
		got, _ = io.ReadAll(io.LimitReader(srv, int64(len(body))))
	}()
	n, err := rx.Write(body)
	wg.Wait()
	if err != nil || n != len(body) || !bytes.Equal(got, body) {
		t.Fatalf("wrote %d of %d bytes (%v); the peer read %d", n, len(body), err, len(got))
	}

	// A fixed receive buffer: autotuned, it grows to tcp_rmem's maximum
	// (32 MiB on some hosts), room for all of the body.
	if err := srv.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	rx.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err = rx.Write(body)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(body) {
		t.Fatalf("write to a peer that does not read: %d bytes, %v; want a timeout before all of it", n, err)
	}
}

// TestPollerStopsWithItsLastSocket: the poller's goroutine ends when the
// last socket leaves, and the next socket starts a new one.
func TestPollerStopsWithItsLastSocket(t *testing.T) {
	rx, srv, _ := rxPair(t, false)
	pollersMu.Lock()
	p := thePoller
	pollersMu.Unlock()
	if p == nil {
		t.Fatal("no poller while a socket is open")
	}
	rx.Close()
	select {
	case <-p.done:
	case <-time.After(bound):
		t.Fatalf("the poller did not stop within %v of its last socket's Close", bound)
	}
	rx2, srv2, _ := rxPair(t, false)
	srv2.Write([]byte("z"))
	if got, err := readAll(t, rx2, 1); err != nil || string(got) != "z" {
		t.Fatalf("read on a socket of the next poller: %q, %v", got, err)
	}
	_ = srv
}
