package live

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

//go:embed assets/index.html
var assets embed.FS

// Snapshotter is what the page shows: a View, or a run of several (a
// sweep's steps one after another).
type Snapshotter interface{ Snapshot() Snapshot }

// Server serves the live page (GET /) and its server-sent events (GET
// /events: one "snapshot" event of Snapshot JSON every Every, and a last
// one with finished true once the run ended).
type Server struct {
	view  Snapshotter
	every time.Duration
	ln    net.Listener
	srv   *http.Server
	done  chan struct{}
	stop  context.CancelFunc
	ctx   context.Context
}

// CheckAddr refuses an address that is not loopback unless public: the
// page shows the run's figures to whoever reaches it, without a login.
func CheckAddr(addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: expected HOST:PORT, e.g. 127.0.0.1:8089: %w", addr, err)
	}
	if public {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: the page has no login, so pass --serve-ui-public to serve it beyond this machine", addr)
	}
	return nil
}

// Serve listens on addr and serves v's snapshots until Close. every is the event
// period (0: 1 s).
func Serve(addr string, v Snapshotter, every time.Duration) (*Server, error) {
	if every <= 0 {
		every = time.Second
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{view: v, every: every, ln: ln, done: make(chan struct{}), ctx: ctx, stop: cancel}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /snapshot", s.snapshot)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln) //nolint:errcheck // ends with Close
	}()
	return s, nil
}

// URL is the page's address.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/" }

// Close sends every open event stream its last snapshot, then stops.
func (s *Server) Close() error {
	s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	return err
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	b, _ := assets.ReadFile("assets/index.html")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Write(b)
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.view.Snapshot())
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	send := func() error {
		b, err := json.Marshal(s.view.Snapshot())
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", b); err != nil {
			return err
		}
		fl.Flush()
		return nil
	}
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		if send() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			send() //nolint:errcheck // the last one, finished
			return
		case <-t.C:
		}
	}
}
