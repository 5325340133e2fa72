package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/api/apis"
	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/trace"
)

// Server is a running mock. Create it with Start, stop it with Close.
type Server struct {
	cfg      Config
	tokens   TokenCounter
	url      string
	addr     string // host:port of url
	idPrefix string
	meta     LogMeta
	// latency is each served model's latency (Config.Models).
	latency map[string]*Latency

	hs       *http.Server
	serveErr chan error
	ctx      context.Context // parent of every request context
	cancel   context.CancelFunc

	sched *scheduler // owns the streams' event loops; nil: each stream on its goroutine

	slots chan struct{} // batch capacity: a request holds one slot while running
	cache *prefixCache
	store *responseStore // Responses transcripts for previous_response_id
	media *mediaFetcher  // gets media items given by URL
	m     metrics
	lw    *logWriter // nil without LogPath
	ids   atomic.Uint64

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup
	kept     []LogEntry

	closeOnce sync.Once
	closeErr  error
}

// Start listens on cfg.Listen (a random 127.0.0.1 port when empty) and
// serves until Close.
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mock config: %w", err)
	}
	addr := cfg.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mock: listening on %s: %w", addr, err)
	}
	s := &Server{
		cfg:      cfg,
		tokens:   cfg.Tokens,
		url:      "http://" + ln.Addr().String(),
		addr:     ln.Addr().String(),
		serveErr: make(chan error, 1),
		slots:    make(chan struct{}, cfg.Latency.MaxNumSeqs),
		cache:    newPrefixCache(cfg.Latency.PrefixCacheTokens),
		store:    newResponseStore(cfg.ResponseStoreBytes),
		media:    newMediaFetcher(cfg.MediaFetchTimeout.D(), cfg.MaxMediaBytes, cfg.MediaCheck),
	}
	s.m.init(cfg)
	if s.latency, err = cfg.modelLatencies(); err != nil {
		ln.Close()
		return nil, fmt.Errorf("mock: %w", err)
	}
	if s.tokens == nil {
		s.tokens = ApproxTokens
	}
	s.meta = LogMeta{TracekitVersion: trace.Version, URL: s.url, StartMonoNs: clock.Mono(), StartWallNs: clock.Wall(), Config: cfg}
	s.idPrefix = "mock-" + strconv.FormatInt(s.meta.StartWallNs/1e6, 36) + "-"
	if !goroutineStreams {
		if s.sched, err = newScheduler(runtime.GOMAXPROCS(0)); err != nil {
			ln.Close()
			return nil, err
		}
	}
	if cfg.LogPath != "" {
		if s.lw, err = newLogWriter(cfg.LogPath, s.meta); err != nil {
			ln.Close()
			if s.sched != nil {
				s.sched.stop()
			}
			return nil, err
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.hs = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 30 * time.Second,
		// No IdleTimeout: trackedConn closes idle connections itself
		// (Config.IdleClose, the idleclose fault, reapIdle).
		BaseContext: func(net.Listener) context.Context { return s.ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ConnState:   s.connState,
	}
	go func() { s.serveErr <- s.hs.Serve(trackingListener{ln.(*net.TCPListener), s}) }()
	return s, nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, spec := range apis.All() { // every API on each of its paths
		for _, path := range spec.Paths {
			mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, &spec) })
		}
	}
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /reset_prefix_cache", func(w http.ResponseWriter, _ *http.Request) {
		s.cache.reset()
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.m.writePrometheus(w, s.cfg.Model)
	})
	return mux
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	created := s.meta.StartWallNs / 1e9
	var data []map[string]any
	for _, name := range s.cfg.servedNames() {
		data = append(data, map[string]any{
			"id": name, "object": "model", "created": created, "owned_by": "tracekit",
			"root": name, "parent": nil, "max_model_len": s.latency[name].MaxModelLen,
		})
	}
	body, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// URL is the base URL, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// Meta returns the log's file metadata: start times and the config.
func (s *Server) Meta() LogMeta { return s.meta }

// Stats returns a snapshot of the server's counters and its lateness.
func (s *Server) Stats() Stats { return s.m.stats() }

// Log returns the entries recorded so far when Config.KeepLog is set. A
// request's entry is recorded just before its last bytes (the usage chunk
// and [DONE], or the error body) are written, so a client that has read
// its whole response finds its entry.
func (s *Server) Log() []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]LogEntry(nil), s.kept...)
}

// ResetPrefixCache empties the prefix cache, as POST /reset_prefix_cache.
func (s *Server) ResetPrefixCache() { s.cache.reset() }

// enter registers an in-flight request; false once the server is closing.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.inflight.Add(1)
	return true
}

// record files a finished entry in memory and in the Parquet log.
func (s *Server) record(e *LogEntry) {
	switch e.Outcome {
	case OutcomeOK:
		s.m.okRequests.Add(1)
	case OutcomeBadRequest:
		s.m.badRequests.Add(1)
	case OutcomeClientGone:
		s.m.clientGone.Add(1)
	}
	if s.cfg.KeepLog {
		s.mu.Lock()
		s.kept = append(s.kept, *e)
		s.mu.Unlock()
	}
	if s.lw != nil {
		row := *e
		row.Body = nil
		s.lw.in <- row // bounded; blocks only if the disk falls behind by logQueue rows
	}
}

// goroutineStreams makes Start run each stream on its handler goroutine
// with its own timer, the design the schedulers replaced; benchmarks set
// it to compare the two.
var goroutineStreams bool

// connKey keys a request context's net.Conn.
type connKey struct{}

func (s *Server) newID() string {
	return s.idPrefix + strconv.FormatUint(s.ids.Add(1), 10)
}

// Close stops the server at once: in-flight streams are cut (their entries
// say "canceled"), then the log is completed. Safe to call more than once.
func (s *Server) Close() error { return s.Shutdown(nil) }

// Shutdown stops accepting requests, lets in-flight ones finish until ctx
// is done (a nil ctx does not wait), cuts the rest, then completes the log.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		drained := make(chan struct{})
		go func() { s.inflight.Wait(); close(drained) }()
		if ctx != nil {
			select {
			case <-drained:
			case <-ctx.Done():
			}
		}
		s.cancel()
		hctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		err := s.hs.Shutdown(hctx)
		stop()
		if err != nil {
			err = s.hs.Close() // unblocks handlers stuck writing to a client that does not read
		}
		<-drained
		if s.sched != nil {
			s.sched.stop()
		}
		if serr := <-s.serveErr; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if s.lw != nil {
			err = errors.Join(err, s.lw.close(s.Stats()))
		}
		s.closeErr = err
	})
	return s.closeErr
}
