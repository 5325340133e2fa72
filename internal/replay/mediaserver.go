package replay

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracekit/tracekit/internal/api"
	"github.com/tracekit/tracekit/internal/fielderr"
	"github.com/tracekit/tracekit/trace"
)

// mediaCacheBytes bounds what the media server keeps of the items the
// look-ahead made; an item past it is made again when fetched.
const mediaCacheBytes = 256 << 20

// mediaServer serves a run's media over HTTP (Config.MediaURLBase), so
// requests carry URLs instead of data URIs: the server under test fetches
// each item from the client host. An item's URL names its shape and seed
// (mediaName), so any item of the trace can be served; the look-ahead puts
// the bytes it made in a bounded cache (put) and a fetch of an item no
// longer there makes it again (a real item: loads it from store). Its goroutines are net/http's, ended by
// close (Runner.Close).
type mediaServer struct {
	base   string // the URL prefix items are named under, no trailing "/"
	prefix string // base's path
	srv    *http.Server
	done   chan struct{}
	store  *trace.MediaStore // real items' bytes; nil when the trace has none

	mu    sync.Mutex
	cache map[string]string
	order []string // insertion order, for eviction
	bytes int

	served atomic.Int64 // items served: the tests' count
}

// startMediaServer listens on base's host and port (an http URL) and
// serves items under its path.
func startMediaServer(base string) (*mediaServer, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fieldErr("MediaURLBase", "%s %q: expected an http URL of this host, e.g. http://127.0.0.1:8089/media", fielderr.Name("MediaURLBase"), base)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("serving media on %s: %w", u.Host, err)
	}
	s := &mediaServer{prefix: strings.TrimSuffix(u.Path, "/"), cache: map[string]string{}, done: make(chan struct{})}
	u.Host = ln.Addr().String() // a port of 0 is the one the kernel chose
	s.base = strings.TrimSuffix(u.String(), "/")
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln) // returns when close shuts it
	}()
	return s, nil
}

// close stops the server and waits for it.
func (s *mediaServer) close() {
	s.srv.Close()
	<-s.done
}

// put keeps the bytes b of item m for its fetch and returns its URL.
func (s *mediaServer) put(m *trace.Media, b string) string {
	name := mediaName(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cache[name]; !ok {
		s.cache[name] = b
		s.order = append(s.order, name)
		s.bytes += len(b)
		for s.bytes > mediaCacheBytes && len(s.order) > 1 {
			old := s.order[0]
			s.order = s.order[1:]
			s.bytes -= len(s.cache[old])
			delete(s.cache, old)
		}
	}
	return s.base + "/" + name
}

// ServeHTTP serves GET (and HEAD) of an item by its name.
func (s *mediaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, s.prefix+"/")
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	m, err := parseMediaName(name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.mu.Lock()
	b, ok := s.cache[name]
	s.mu.Unlock()
	if !ok {
		made, err := itemBytes(nil, &m, s.store, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		b = string(made)
	}
	w.Header().Set("Content-Type", api.MIME(&m))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	s.served.Add(1)
	if r.Method == http.MethodGet {
		w.Write([]byte(b))
	}
}

// mediaName names a virtual item by what makes its bytes,
// kind-WxH-Nf-Dms-seed.format, and a real one by its hash,
// kind-sha256.format.
func mediaName(m *trace.Media) string {
	if m.Hash != "" {
		return fmt.Sprintf("%s-%s.%s", m.Kind, m.Hash, m.Format)
	}
	return fmt.Sprintf("%s-%dx%d-%df-%dms-%d.%s", m.Kind, m.Width, m.Height, m.Frames, m.DurationMs, m.Seed, m.Format)
}

var errMediaName = errors.New("not a media item's name")

func parseMediaName(name string) (trace.Media, error) {
	var m trace.Media
	stem, format, ok := strings.Cut(name, ".")
	parts := strings.Split(stem, "-")
	if ok && len(parts) == 2 && len(parts[1]) == 64 {
		m = trace.Media{Kind: parts[0], Format: format, Hash: parts[1]}
		if mediaName(&m) != name {
			return m, errMediaName
		}
		return m, nil
	}
	if !ok || len(parts) < 5 {
		return m, errMediaName
	}
	// the seed may be negative: it is the rest after the fourth "-"
	seed, err := strconv.ParseInt(strings.Join(parts[4:], "-"), 10, 64)
	if err != nil {
		return m, errMediaName
	}
	w, h, ok := strings.Cut(parts[1], "x")
	var n [4]int64
	for i, s := range []string{w, h, strings.TrimSuffix(parts[2], "f"), strings.TrimSuffix(parts[3], "ms")} {
		if n[i], err = strconv.ParseInt(s, 10, 32); err != nil || !ok {
			return m, errMediaName
		}
	}
	m = trace.Media{Kind: parts[0], Format: format, Width: int32(n[0]), Height: int32(n[1]), Frames: int32(n[2]), DurationMs: int32(n[3]), Seed: seed}
	if mediaName(&m) != name {
		return m, errMediaName
	}
	return m, nil
}
