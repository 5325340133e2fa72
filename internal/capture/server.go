package capture

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ProxyServer runs a Proxy on a listener, like httptest.Server. It is the
// proxy's own HTTP/1.1 server (conn.go): one goroutine per client
// connection reads its requests and forwards each response itself.
type ProxyServer struct {
	proxy *Proxy
	ln    net.Listener
	done  chan struct{} // closed when the accept loop ended

	mu      sync.Mutex
	conns   map[*clientConn]struct{}
	closing bool
	drained chan struct{} // closed when conns empties while closing
	wg      sync.WaitGroup
}

// StartProxy listens on addr ("" means a random 127.0.0.1 port) and serves
// a new Proxy there.
func StartProxy(cfg ProxyConfig, addr string) (*ProxyServer, error) {
	p, err := NewProxy(cfg)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	s := &ProxyServer{proxy: p, ln: ln, done: make(chan struct{}), conns: map[*clientConn]struct{}{}}
	go s.accept()
	return s, nil
}

// accept runs until the listener is closed by Shutdown.
func (s *ProxyServer) accept() {
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
				s.proxy.cfg.Logf("capture: accepting a connection: %v (retrying in %v)", err, delay)
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
		cc := &clientConn{srv: s, p: s.proxy, c: c}
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

// URL is the proxy's base URL.
func (s *ProxyServer) URL() string { return "http://" + s.ln.Addr().String() }

// Proxy returns the proxy.
func (s *ProxyServer) Proxy() *Proxy { return s.proxy }

// Close stops accepting, lets in-flight requests finish for up to grace
// (then cuts them: they are recorded as canceled), and completes the files.
func (s *ProxyServer) Close() error { return s.Shutdown(5 * time.Second) }

// Shutdown is Close with a chosen grace period: idle keep-alive
// connections are closed at once, those with a request in flight once it
// ends or when grace is up.
func (s *ProxyServer) Shutdown(grace time.Duration) error {
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
	return s.proxy.Close()
}

// remove forgets a connection that ended.
func (s *ProxyServer) remove(cc *clientConn) {
	s.mu.Lock()
	delete(s.conns, cc)
	if s.closing && len(s.conns) == 0 {
		close(s.drained)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// isClosing reports whether Shutdown began.
func (s *ProxyServer) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// bufioPool holds client connections' read buffers while they wait.
var bufioPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}
