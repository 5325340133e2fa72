//go:build linux

package stamp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// pushed collects what a push hands over.
type pushed struct {
	mu     sync.Mutex
	data   bytes.Buffer
	pieces []string
	stamps []int64
	err    error
	ended  chan struct{}
}

func newPushed() *pushed { return &pushed{ended: make(chan struct{})} }

func (p *pushed) fn(b []byte, stamp int64, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.err = err
		close(p.ended)
		return false
	}
	p.data.Write(b)
	p.pieces = append(p.pieces, string(b))
	p.stamps = append(p.stamps, stamp)
	return true
}

// wait waits for the push's end, failing the test after 10 s.
func (p *pushed) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the push never saw the connection's end")
	}
}

// TestPushDeliversEverything: bytes that came before the push (announced
// to Read, not to the push), bytes that come after it, and the peer's
// close all reach the push function, in order, with the close as io.EOF.
// In kernel-offset mode every event is handed over on its own, stamped
// after its write began and before the next one's.
func TestPushDeliversEverything(t *testing.T) {
	const event = "data: {\"choices\":[{\"text\":\"x\"}]}\n\n"
	for _, split := range []bool{false, true} {
		name := "kernel"
		if split {
			name = "kernel-offset"
		}
		t.Run(name, func(t *testing.T) {
			rx, srv, st := rxPair(t, split)
			before := writeSpaced(t, srv, 30*time.Millisecond) // queued before the push
			time.Sleep(30 * time.Millisecond)
			p := newPushed()
			if !rx.Push(make([]byte, 4096), p.fn) {
				t.Fatal("Push refused a live connection")
			}
			after := writeSpaced(t, srv, 30*time.Millisecond)
			srv.Close()
			p.wait(t)
			rx.Unpush()
			if !errors.Is(p.err, io.EOF) {
				t.Fatalf("end %v, want io.EOF", p.err)
			}
			if want := strings.Repeat(event, 6); p.data.String() != want {
				t.Fatalf("pushed %q, want %q", p.data.String(), want)
			}
			for i := 1; i < len(p.stamps); i++ {
				if p.stamps[i] < p.stamps[i-1] {
					t.Errorf("stamp %d (%d) before stamp %d (%d)", i, p.stamps[i], i-1, p.stamps[i-1])
				}
			}
			if !split {
				return
			}
			if len(p.pieces) != 6 {
				t.Fatalf("%d pieces %q, want one per event", len(p.pieces), p.pieces)
			}
			writes := append(before[:], after[:]...)
			width := st.Meta().OffsetWidthNs // the observer's stamps are converted with this uncertainty
			for i, at := range p.stamps {
				if at < writes[i]-width || (i+1 < len(writes) && at >= writes[i+1]) {
					t.Errorf("event %d stamped %d: want after its write (%d), before the next", i, at, writes[i])
				}
			}
		})
	}
}

// TestUnpushHandsBackToRead: after Unpush the push function is never
// called again, and Read returns what comes next.
func TestUnpushHandsBackToRead(t *testing.T) {
	rx, srv, _ := rxPair(t, true)
	p := newPushed()
	if !rx.Push(make([]byte, 4096), p.fn) {
		t.Fatal("Push refused a live connection")
	}
	if _, err := srv.Write([]byte("data: 1\n\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		got := p.data.String()
		p.mu.Unlock()
		if got == "data: 1\n\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pushed %q, want the first event", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	rx.Unpush()
	if _, err := srv.Write([]byte("data: 2\n\n")); err != nil {
		t.Fatal(err)
	}
	rx.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, err := rx.Read(buf)
	if err != nil || string(buf[:n]) != "data: 2\n\n" {
		t.Fatalf("Read after Unpush: %q, %v", buf[:n], err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.data.String() != "data: 1\n\n" {
		t.Errorf("the push got %q after Unpush", p.data.String())
	}
}

// TestPushStopKeepsTheRest: bytes behind the piece where the push function
// said stop stay for Read (Pending counts them), none are lost.
func TestPushStopKeepsTheRest(t *testing.T) {
	rx, srv, _ := rxPair(t, true)
	if _, err := srv.Write([]byte("data: 1\n\ndata: 2\n\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	var got []string
	stopped := make(chan struct{})
	if !rx.Push(make([]byte, 4096), func(b []byte, _ int64, err error) bool {
		got = append(got, string(b))
		close(stopped)
		return false
	}) {
		t.Fatal("Push refused a live connection")
	}
	<-stopped
	rx.Unpush()
	if len(got) != 1 || got[0] != "data: 1\n\n" || rx.Pending() != len("data: 2\n\n") {
		t.Fatalf("pushed %q, %d bytes pending", got, rx.Pending())
	}
	buf := make([]byte, 64)
	n, err := rx.Read(buf)
	if err != nil || string(buf[:n]) != "data: 2\n\n" {
		t.Fatalf("Read after the push stopped: %q, %v", buf[:n], err)
	}
}

// A closed connection cannot be pushed.
func TestPushClosed(t *testing.T) {
	rx, _, _ := rxPair(t, false)
	rx.Close()
	if rx.Push(make([]byte, 16), func([]byte, int64, error) bool { return true }) {
		t.Error("Push took a closed connection")
	}
	var _ net.Conn = rx
}
