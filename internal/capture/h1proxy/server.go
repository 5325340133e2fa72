package h1proxy

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"time"
)

// nativeServer is the Native stack's HTTP/1.1 server (conn.go): one
// goroutine per client connection reads its requests and forwards each
// response itself.
type nativeServer struct {
	f    *forwarder
	ln   net.Listener
	done chan struct{} // closed when the accept loop ended

	mu      sync.Mutex
	conns   map[*clientConn]struct{}
	closing bool
	drained chan struct{} // closed when conns empties while closing
	wg      sync.WaitGroup
}

// startNative serves ln with the Native stack.
func startNative(f *forwarder, ln net.Listener) *nativeServer {
	s := &nativeServer{f: f, ln: ln, done: make(chan struct{}), conns: map[*clientConn]struct{}{}}
	go s.accept()
	return s
}

// accept runs until the listener is closed by Shutdown.
func (s *nativeServer) accept() {
	defer close(s.done)
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				// Out of descriptors or a transient failure: back off as
				// net/http does, rather than spin or stop serving.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.f.logf("capture: accepting a connection: %v (retrying in %v)", err, delay)
				time.Sleep(delay)
				continue
			}
			return
		}
		delay = 0
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
			tc.SetKeepAlive(true)
			tc.SetKeepAlivePeriod(3 * time.Minute)
		}
		cc := &clientConn{srv: s, f: s.f, c: c}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[cc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go cc.serve()
	}
}

// shutdown stops accepting: idle keep-alive connections are closed at
// once, those with a request in flight once it ends or when grace is up
// (Server.Shutdown); it returns once every connection's goroutine ended.
func (s *nativeServer) shutdown(grace time.Duration) {
	s.ln.Close()
	<-s.done
	s.mu.Lock()
	s.closing = true
	s.drained = make(chan struct{})
	if len(s.conns) == 0 {
		close(s.drained)
	}
	for cc := range s.conns {
		cc.closeIfIdle()
	}
	drained := s.drained
	s.mu.Unlock()
	t := time.NewTimer(grace)
	select {
	case <-drained:
	case <-t.C:
		s.mu.Lock()
		for cc := range s.conns {
			cc.cut()
		}
		s.mu.Unlock()
	}
	t.Stop()
	s.wg.Wait()
}

// remove forgets a connection that ended.
func (s *nativeServer) remove(cc *clientConn) {
	s.mu.Lock()
	delete(s.conns, cc)
	if s.closing && len(s.conns) == 0 {
		close(s.drained)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// isClosing reports whether Shutdown began.
func (s *nativeServer) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// bufioPool holds client connections' read buffers while they wait.
var bufioPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}
