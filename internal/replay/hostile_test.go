package replay

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// hostileServer is a small HTTP/1.1 server on a raw net.Listener that
// answers like an OpenAI-compatible streaming server and then misbehaves
// the way real servers and proxies do. It logs the X-Request-Id of every
// request it read completely (its ground truth) and counts connections.
type hostileServer struct {
	ln net.Listener
	// idleClose closes a keep-alive connection silently once it has been
	// idle this long after a response (uvicorn's timeout_keep_alive).
	idleClose time.Duration
	// closeAfter closes the connection after every response without
	// sending Connection: close.
	closeAfter bool
	// respond writes the response to one traffic request (probes get
	// sseAnswer); nil: sseAnswer.
	respond func(w *bufio.Writer, req *http.Request, body []byte)
	// respondProbes makes respond answer probe requests too.
	respondProbes bool
	// noHeaders reads traffic requests and never answers them.
	noHeaders bool

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	ids    []string       // X-Request-Id of each traffic request
	reqs   []seenRequest  // every request read
	connOf map[string]int // traffic request id -> the connection it came on
	nconn  int
}

// startHostile starts s on a loopback port; the test's cleanup stops it.
func startHostile(t testing.TB, s *hostileServer) *hostileServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln, s.conns, s.connOf = ln, map[net.Conn]struct{}{}, map[string]int{}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *hostileServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *hostileServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// requests returns the ids of the traffic requests read, in order, and
// the number of distinct connections they came on.
func (s *hostileServer) requests() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := map[int]bool{}
	for _, c := range s.connOf {
		conns[c] = true
	}
	return append([]string(nil), s.ids...), len(conns)
}

func (s *hostileServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.nconn++
		idx := s.nconn
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serve(c, idx)
		}()
	}
}

func (s *hostileServer) serve(c net.Conn, idx int) {
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	for served := 0; ; served++ {
		if served > 0 && s.idleClose > 0 {
			c.SetReadDeadline(time.Now().Add(s.idleClose))
		}
		if _, err := br.Peek(1); err != nil {
			return // idle too long, or the client left: close without a word
		}
		c.SetReadDeadline(time.Time{})
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		s.mu.Lock()
		probe := req.Header.Get("X-Tracekit-Probe") == "1"
		s.reqs = append(s.reqs, seenRequest{method: req.Method, path: req.URL.Path, id: req.Header.Get("X-Request-Id"),
			probe: probe, acceptEncoding: req.Header.Get("Accept-Encoding"), body: string(body)})
		if id := req.Header.Get("X-Request-Id"); id != "" && !probe {
			s.ids = append(s.ids, id)
			s.connOf[id] = idx
		}
		s.mu.Unlock()
		if s.noHeaders && !probe {
			io.Copy(io.Discard, br) // until the client gives up
			return
		}
		respond := s.respond
		if respond == nil || (probe && !s.respondProbes) {
			respond = sseAnswer
		}
		respond(bw, req, body)
		if bw.Flush() != nil || s.closeAfter {
			return
		}
	}
}

// seenRequest is what the server saw of one request.
type seenRequest struct {
	method, path, id string
	probe            bool
	acceptEncoding   string
	body             string
}

// seen returns every request read, in order.
func (s *hostileServer) seen() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.reqs...)
}

// sseAnswer writes a chunked stream of three one-token events, a usage
// chunk and [DONE].
func sseAnswer(w *bufio.Writer, req *http.Request, _ []byte) {
	if req.Method != "POST" {
		b := `{"data":[{"id":"hostile-model"}]}`
		fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		return
	}
	fmt.Fprint(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	chunk := func(s string) { fmt.Fprintf(w, "%x\r\n%s\r\n", len(s), s) }
	for i := range 3 {
		chunk(fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d}}\n\n", i, i+1))
	}
	chunk("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\n")
	chunk("data: [DONE]\n\n")
	fmt.Fprint(w, "0\r\n\r\n")
}
