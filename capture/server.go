package capture

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ProxyServer runs a Proxy on a listener, like httptest.Server.
type ProxyServer struct {
	proxy *Proxy
	srv   *http.Server
	ln    net.Listener
	done  chan error
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
	s := &ProxyServer{proxy: p, ln: ln, done: make(chan error, 1),
		srv: &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// URL is the proxy's base URL.
func (s *ProxyServer) URL() string { return "http://" + s.ln.Addr().String() }

// Proxy returns the handler.
func (s *ProxyServer) Proxy() *Proxy { return s.proxy }

// Close stops accepting, lets in-flight requests finish for up to grace
// (then cuts them: they are recorded as canceled), and completes the files.
func (s *ProxyServer) Close() error { return s.Shutdown(5 * time.Second) }

// Shutdown is Close with a chosen grace period.
func (s *ProxyServer) Shutdown(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	<-s.done
	return s.proxy.Close()
}
