package replay

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/chunked"
)

// cannedServer is a hostileServer that answers each request with the
// next of answers, byte for byte; closeAfter closes the connection after
// every answer.
func cannedServer(t *testing.T, closeAfter bool, answers ...string) *hostileServer {
	var mu sync.Mutex
	return startHostile(t, &hostileServer{closeAfter: closeAfter, respondProbes: true,
		respond: func(w *bufio.Writer, _ *http.Request, _ []byte) {
			mu.Lock()
			defer mu.Unlock()
			if len(answers) > 0 {
				w.WriteString(answers[0])
				answers = answers[1:]
			}
		}})
}

// connections is how many connections s accepted.
func (s *hostileServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nconn
}

// exchange sends one POST through h and reads its whole body.
func h1Exchange(t *testing.T, h *h1Client) (int, string, error) {
	t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.SetRequestURI("http://" + h.addr + "/v1/chat/completions")
	req.Header.SetMethod("POST")
	req.SetBodyString(`{"stream":true}`)
	c, err := h.get()
	if err != nil {
		return 0, "", err
	}
	var resp h1Resp
	if err := h.roundTrip(c, req, &resp, time.Now().Add(5*time.Second)); err != nil {
		return 0, "", err
	}
	b, err := io.ReadAll(resp.Body())
	resp.close(err)
	return resp.StatusCode(), string(b), err
}

func newTestClient(t *testing.T, s *hostileServer) *h1Client {
	cs := newConnSet(&Config{StampMode: StampGoroutine, Targets: []string{"http://x"}, DialTimeout: 5 * time.Second})
	h := &h1Client{addr: s.ln.Addr().String(), dial: cs.dialer(nil), idleTimeout: time.Minute}
	t.Cleanup(h.closeIdle)
	return h
}

// Each framing a server may use is read to its end, and the connection
// is used again exactly when the server keeps it open and the body's end
// was found.
func TestH1BodiesAndReuse(t *testing.T) {
	for _, tc := range []struct {
		name, resp string
		status     int
		body       string
		reused     bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, "hello", true},
		{"chunked with trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nT: 1\r\n\r\n", 200, "hello", true},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", true},
		{"interim responses first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 200, "ok", false},
		{"HTTP/1.0 without keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", false},
		{"bytes after the body", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", 200, "ok", false},
		{"chunked, bytes after the body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nEXTRA", 200, "ok", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := cannedServer(t, false, tc.resp, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
			h := newTestClient(t, s)
			status, body, err := h1Exchange(t, h)
			if err != nil || status != tc.status || body != tc.body {
				t.Fatalf("status %d body %q error %v, want %d %q", status, body, err, tc.status, tc.body)
			}
			if _, body, err := h1Exchange(t, h); err != nil || body != "next" {
				t.Fatalf("second exchange: body %q error %v", body, err)
			}
			want := 2
			if tc.reused {
				want = 1
			}
			if n := s.connections(); n != want {
				t.Errorf("%d connections for two exchanges, want %d", n, want)
			}
		})
	}
}

// A body read until the server closes ends cleanly at the close; one that
// ends before its framing says is io.ErrUnexpectedEOF, never a short
// body taken for whole.
func TestH1BodyEnds(t *testing.T) {
	for _, tc := range []struct {
		name, resp, body string
		err              error
	}{
		{"until close", "HTTP/1.1 200 OK\r\n\r\nall of it", "all of it", nil},
		{"short content-length", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "short", io.ErrUnexpectedEOF},
		{"chunked cut off", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", "hel", io.ErrUnexpectedEOF},
		{"chunked without its last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "hello", io.ErrUnexpectedEOF},
		{"malformed chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nhello\r\n", "", chunked.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := cannedServer(t, true, tc.resp)
			_, body, err := h1Exchange(t, newTestClient(t, s))
			if body != tc.body || !errors.Is(err, tc.err) {
				t.Errorf("body %q error %v, want %q and %v", body, err, tc.body, tc.err)
			}
		})
	}
}

// Response headers beyond the read buffer are refused with an error that
// says so, not read without bound.
func TestH1HugeHeaders(t *testing.T) {
	s := cannedServer(t, true, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 2*readBufSize)+"\r\nContent-Length: 0\r\n\r\n")
	_, _, err := h1Exchange(t, newTestClient(t, s))
	if err == nil || !strings.Contains(err.Error(), "small read buffer") {
		t.Errorf("error %v, want one about the read buffer", err)
	}
}
