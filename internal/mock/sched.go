package mock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/clock"
)

// Timing of the schedulers' waits.
const (
	// coalesce is the shortest wait a scheduler sleeps for: events due
	// within coalesce of each other are written in one wake-up, each at
	// most coalesce late, so at high rates a wake-up (a syscall and a
	// context switch) serves several events.
	coalesce = 50 * time.Microsecond
	// fineWait is the part of a wait slept on a clock.Precise (a timerfd
	// in the netpoller, tens of us late) rather than a Go timer, which the
	// runtime fires with millisecond resolution when the process is idle.
	// Not clock_nanosleep: a goroutine blocked in that syscall holds its P
	// until sysmon takes it back, and an in-process mock then starves the
	// client it shares the process with (measured: the capture proxy
	// benchmark's added ITL p99 went from ~4 ms to ~25 ms at 1,000 streams).
	fineWait = 2 * time.Millisecond
)

// A scheduler owns the event loops of many streams: a heap of streams by
// the due time of their next event, and one worker goroutine per P that
// pops a due stream, encodes its event and writes it straight to the
// stream's socket with one non-blocking write, then plans the next event
// and pushes the stream back. An event costs one syscall and no goroutine
// wake-up; a wake-up serves every event due by then. The heap is shared,
// so when the OS preempts one worker's thread the others carry on with
// every stream but the one it holds. A stream whose socket buffer is full
// (a client that does not keep up) is handed back to its handler
// goroutine, which finishes the write blocking and continues alone.
//
// The handler goroutine parks while the scheduler owns its exchange; the
// heap's mutex and the exchange's back channel order every access to it.
type scheduler struct {
	precise  *clock.Precise  // fine waits; no spin, the mock must not burn CPU
	stopCtx  context.Context // ends fine waits at stop
	cancel   context.CancelFunc
	mu       sync.Mutex
	h        []*exchange   // min-heap by sched; exchange.heapIdx is the position
	wake     chan struct{} // a stream became the earliest: sleeping workers look again
	quit     chan struct{}
	finished sync.WaitGroup
}

func newScheduler(workers int) (*scheduler, error) {
	p, err := clock.NewPrecise(0)
	if err != nil {
		return nil, fmt.Errorf("starting the mock's event scheduler: %w", err)
	}
	s := &scheduler{precise: p, wake: make(chan struct{}, workers), quit: make(chan struct{})}
	s.stopCtx, s.cancel = context.WithCancel(context.Background())
	for range workers {
		s.finished.Go(s.work)
	}
	return s, nil
}

// stop ends the workers; every stream must have been handed back.
func (s *scheduler) stop() {
	close(s.quit)
	s.cancel()
	s.finished.Wait()
	s.precise.Close()
}

// own runs x's event loop on the scheduler until the stream ends or the
// request's context ends, and returns how it ended.
func (s *scheduler) own(x *exchange) streamEnd {
	x.back = make(chan streamEnd, 1)
	if end, ok := x.prepare(); !ok {
		return end
	}
	s.mu.Lock()
	s.push(x)
	first := x.heapIdx == 0
	s.mu.Unlock()
	if first {
		s.nudge()
	}
	select {
	case end := <-x.back:
		return end
	case <-x.ctx.Done():
	}
	s.mu.Lock()
	x.canceled = true
	queued := x.heapIdx >= 0
	if queued {
		s.remove(x.heapIdx)
	}
	s.mu.Unlock()
	if queued {
		return endCanceled
	}
	return <-x.back // a worker holds it and hands it back
}

// nudge wakes the workers sleeping on a timer, without blocking.
func (s *scheduler) nudge() {
	for range cap(s.wake) {
		select {
		case s.wake <- struct{}{}:
		default:
			return
		}
	}
}

// work is one worker: take the earliest stream when it is due, or sleep
// until it is (at least coalesce, so a wake-up serves several events).
func (s *scheduler) work() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := clock.Mono()
		due := int64(1<<63 - 1)
		s.mu.Lock()
		if len(s.h) > 0 {
			if x := s.h[0]; x.sched <= now {
				s.remove(0)
				s.mu.Unlock()
				s.step(x)
				continue
			}
			due = max(s.h[0].sched, now+int64(coalesce))
		}
		s.mu.Unlock()
		if wait := due - now; wait > int64(fineWait) {
			timer.Reset(time.Duration(wait - int64(fineWait)))
			select {
			case <-s.wake:
			case <-timer.C:
			case <-s.quit:
				return
			}
			timer.Stop()
			continue
		}
		if _, err := s.precise.WaitUntil(s.stopCtx, due); err != nil {
			return
		}
	}
}

// step writes x's due event, plans the next and queues x again, or hands
// it back when its stream is over.
func (s *scheduler) step(x *exchange) {
	end, ok := x.fire()
	if ok {
		end, ok = x.prepare()
	}
	if ok {
		s.mu.Lock()
		canceled := x.canceled
		if !canceled {
			s.push(x)
		}
		s.mu.Unlock()
		if !canceled {
			return
		}
		end = endCanceled
	}
	x.back <- end
}

// The heap: a binary min-heap on exchange.sched.

func (s *scheduler) push(x *exchange) {
	x.heapIdx = len(s.h)
	s.h = append(s.h, x)
	s.up(x.heapIdx)
}

func (s *scheduler) pop() { s.remove(0) }

func (s *scheduler) remove(i int) {
	x, last := s.h[i], len(s.h)-1
	if i != last {
		s.swap(i, last)
	}
	s.h[last] = nil
	s.h = s.h[:last]
	if i != last {
		s.down(i)
		s.up(i)
	}
	x.heapIdx = -1
}

func (s *scheduler) swap(i, j int) {
	s.h[i], s.h[j] = s.h[j], s.h[i]
	s.h[i].heapIdx, s.h[j].heapIdx = i, j
}

func (s *scheduler) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.h[p].sched <= s.h[i].sched {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *scheduler) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(s.h) {
			return
		}
		if c+1 < len(s.h) && s.h[c+1].sched < s.h[c].sched {
			c++
		}
		if s.h[i].sched <= s.h[c].sched {
			return
		}
		s.swap(i, c)
		i = c
	}
}

// rawWriter writes HTTP/1.1 chunks straight to a socket the net/http
// server owns, without blocking: it is used only between the handler's
// flush of the response headers and its next write through net/http, while
// the handler goroutine is parked, so the bytes are in order.
type rawWriter struct {
	rc    syscall.RawConn
	write func(fd uintptr) bool // w.writeFD, bound once
	frame []byte                // the chunk being written
	n     int                   // bytes of frame written
	err   error
}

func newRawWriter(rc syscall.RawConn) *rawWriter {
	w := &rawWriter{rc: rc, frame: make([]byte, 0, 576)}
	w.write = w.writeFD
	return w
}

// errWouldBlock says the socket buffer is full; frame[n:] is unwritten.
var errWouldBlock = errors.New("socket buffer full")

// writeChunk frames b as one chunk and makes one write attempt: nil when
// all of it went out, errWouldBlock when only frame[:n] did, else the
// socket's error.
func (w *rawWriter) writeChunk(b []byte) error {
	f := appendChunkSize(w.frame[:0], len(b))
	f = append(append(f, b...), "\r\n"...)
	w.frame, w.n, w.err = f, 0, nil
	if err := w.rc.Write(w.write); err != nil {
		return err
	}
	return w.err
}

func (w *rawWriter) writeFD(fd uintptr) bool {
	for w.n < len(w.frame) {
		n, err := unix.Write(int(fd), w.frame[w.n:])
		if n > 0 {
			w.n += n
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			w.err = errWouldBlock
			return true
		case err != nil:
			w.err = err
			return true
		case n == 0:
			w.err = errWouldBlock
			return true
		}
	}
	return true
}

// rest is the part of the last chunk not yet written.
func (w *rawWriter) rest() []byte { return w.frame[w.n:] }

// appendChunkSize appends the chunk header: the size in hex and CRLF.
func appendChunkSize(b []byte, n int) []byte {
	const hex = "0123456789abcdef"
	var tmp [16]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = hex[n&15]
		n >>= 4
		if n == 0 {
			break
		}
	}
	return append(append(b, tmp[i:]...), "\r\n"...)
}
