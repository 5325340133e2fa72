//go:build linux

package stamp

import (
	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/uring"
)

// The pushed connections one batch of edges found readable are read
// together: one io_uring_enter makes all their recvmsg calls (package
// uring) instead of a system call each, which on a virtual machine cost
// more than the reads. Each call keeps its own header and control buffer
// (the Conn's), so each read keeps its own kernel stamp. Where the kernel
// or a sandbox refuses io_uring, or the ring fails, the poller reads one
// connection at a time as before (pushEdge).

// ringEntries is the most reads one submission makes (more readable
// connections take more submissions); ringChunk is each read's share of
// the batch's buffer: a connection whose read fills it is read again on
// the poller's next turn.
const (
	ringEntries = 64
	ringChunk   = 16 << 10
)

// ringReader is the poller's ring and the batch's scratch; the poller's
// goroutine only.
type ringReader struct {
	ring  *uring.Ring
	buf   []byte
	msgs  []uring.Msg
	conns []*Conn
}

// newRingReader is a ringReader, nil where no ring can be set up.
func newRingReader() *ringReader {
	r, err := uring.New(ringEntries)
	if err != nil {
		return nil
	}
	n := r.Size()
	return &ringReader{ring: r, msgs: make([]uring.Msg, 0, n), conns: make([]*Conn, 0, n)}
}

func (r *ringReader) close() {
	if r != nil {
		r.ring.Close()
	}
}

// serve reads the pushed connections cs, a ring's worth at a time; it
// appends those with bytes perhaps left to again and reports whether a
// goroutine may have been readied (as pushEdge does). It reports ok false
// when the ring failed: the connections not served are in again, for the
// poller to read one at a time.
func (r *ringReader) serve(cs, again []*Conn) (_ []*Conn, readied, ok bool) {
	if r.buf == nil {
		r.buf = make([]byte, r.ring.Size()*ringChunk)
	}
	for len(cs) > 0 {
		k := min(len(cs), r.ring.Size())
		var woke bool
		again, woke, ok = r.batch(cs[:k], again)
		readied = readied || woke
		if !ok {
			return append(again, cs[k:]...), readied, false
		}
		cs = cs[k:]
	}
	return again, readied, true
}

// batch reads cs (at most the ring's size) with one submission.
func (r *ringReader) batch(cs, again []*Conn) (_ []*Conn, readied, ok bool) {
	r.msgs, r.conns = r.msgs[:0], r.conns[:0]
	for _, c := range cs {
		if c.inBatch { // listed twice (left from the last turn, and a new edge)
			continue
		}
		// Locked as pushRead locks them: the push for the call and the
		// hand-out, the socket for the call only (a Close waits).
		c.push.mu.Lock()
		if c.push.fn == nil { // the push ended since the edge: Read takes it
			c.rready.Store(true)
			poke(c.rwake)
			c.push.mu.Unlock()
			readied = true
			continue
		}
		c.mu.RLock()
		if c.shut.Load() {
			c.mu.RUnlock()
			c.pushClosed()
			c.push.mu.Unlock()
			readied = true
			continue
		}
		i := len(r.msgs)
		c.prepRecvmsg(r.buf[i*ringChunk : (i+1)*ringChunk])
		r.msgs = append(r.msgs, uring.Msg{Fd: c.fd, Hdr: &c.hdr})
		r.conns = append(r.conns, c)
		c.inBatch = true
	}
	err := r.ring.Recvmsg(r.msgs)
	for _, c := range r.conns {
		c.iov.Base = nil
		c.mu.RUnlock()
	}
	for i, c := range r.conns {
		c.inBatch = false
		switch m := &r.msgs[i]; {
		case !m.Done, m.Errno == unix.EINTR: // not made: the next turn reads it
			again = append(again, c)
		default:
			var rerr error
			if m.Errno != 0 {
				rerr = m.Errno
			}
			c.st.ringReads.Add(1)
			if c.pushGot(r.buf[i*ringChunk:(i+1)*ringChunk], m.N, rerr) {
				again = append(again, c)
			}
			readied = readied || c.push.fn == nil
		}
		c.push.mu.Unlock()
	}
	clear(r.conns)
	return again, readied, err == nil
}
