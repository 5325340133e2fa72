package capture

import (
	"context"
	"net/http"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
)

// ProxyServer runs a Proxy on a listener, like httptest.Server: an
// h1proxy.Server forwards the traffic and tells the Proxy what it
// forwarded.
type ProxyServer struct {
	proxy *Proxy
	stack *h1proxy.Server
}

// StartProxy listens on addr ("" means a random 127.0.0.1 port) and serves
// a new Proxy there.
func StartProxy(cfg ProxyConfig, addr string) (*ProxyServer, error) {
	p, err := NewProxy(cfg)
	if err != nil {
		return nil, err
	}
	stack, err := h1proxy.Listen(h1proxy.Config{
		Upstream: p.upstream, Stack: cfg.Stack, Transport: cfg.Transport, InsecureSkipVerify: cfg.InsecureSkipVerify,
		MaxBodyBytes: cfg.MaxBodyBytes, Tap: p, Logf: p.cfg.Logf,
	}, addr)
	if err != nil {
		p.Close()
		return nil, err
	}
	return &ProxyServer{proxy: p, stack: stack}, nil
}

// URL is the proxy's base URL.
func (s *ProxyServer) URL() string { return s.stack.URL() }

// Proxy returns the recording side.
func (s *ProxyServer) Proxy() *Proxy { return s.proxy }

// Close stops accepting, lets in-flight requests finish for up to grace
// (then cuts them: they are recorded as canceled), and completes the files.
func (s *ProxyServer) Close() error { return s.Shutdown(5 * time.Second) }

// Shutdown is Close with a chosen grace period: idle keep-alive
// connections are closed at once, those with a request in flight once it
// ends or when grace is up.
func (s *ProxyServer) Shutdown(grace time.Duration) error {
	s.stack.Shutdown(grace)
	return s.proxy.Close()
}

// CheckUpstream asks the upstream for its base URL once, marked as a probe
// (ProbeHeader), through the proxy's transport: any HTTP answer, whatever
// its status, means the upstream is reachable (dial, TLS and HTTP all
// work); the error says what failed otherwise.
func (s *ProxyServer) CheckUpstream(ctx context.Context) error {
	return s.stack.CheckUpstream(ctx, http.Header{ProbeHeader: {"1"}})
}
