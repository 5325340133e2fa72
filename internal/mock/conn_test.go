package mock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// rawConn is a client connection that shows what a pooled client sees on
// a reused connection: every byte, EOF and reset.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, srv *Server) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(2 * time.Minute)) // hang guard only
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// send writes one chat request (streaming or not) with the given id and
// fault header (none when empty), and returns when the write returned.
func (c *rawConn) send(id, fault string, stream bool) error {
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"ignore_eos":true,"stream":%v}`, stream)
	var h strings.Builder
	fmt.Fprintf(&h, "POST /v1/chat/completions HTTP/1.1\r\nHost: mock\r\nContent-Type: application/json\r\nX-Request-Id: %s\r\nContent-Length: %d\r\n", id, len(body))
	if fault != "" {
		fmt.Fprintf(&h, "%s: %s\r\n", FaultHeader, fault)
	}
	h.WriteString("\r\n")
	_, err := io.WriteString(c.conn, h.String()+body)
	return err
}

// response reads one whole response.
func (c *rawConn) response() (*http.Response, []byte, error) {
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, err
}

// readEnd reads until the connection ends and returns how many bytes came
// first and the error that ended it.
func (c *rawConn) readEnd() (int, error) {
	n, err := io.Copy(io.Discard, c.br)
	if err == nil {
		err = io.EOF // io.Copy reports a clean end as nil
	}
	return int(n), err
}

// closedConnError reports whether err is how a client sees a request sent
// on a connection the server had already closed: EOF, or the reset the
// server's kernel answers the request with (EPIPE once the FIN is in).
func closedConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// TestIdleCloseLikeUvicorn: with IdleClose, a request sent on a kept-alive
// connection before the idle time ran out is answered; once the server
// closed the connection (a FIN, not a reset, never before the idle time
// since the last response), a read returns EOF with no byte, and a request
// sent on it gets no response byte.
func TestIdleCloseLikeUvicorn(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	const idle = time.Second
	srv := startMock(t, func(c *Config) { c.IdleClose = Duration(idle) })

	var c *rawConn
	var second LogEntry
	for attempt := 1; c == nil; attempt++ {
		rc := dialRaw(t, srv)
		a, b := fmt.Sprintf("a%d", attempt), fmt.Sprintf("b%d", attempt)
		if rc.send(a, "", true) != nil {
			t.Fatal("first request not sent")
		}
		if resp, _, err := rc.response(); err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("first response: %v, %v", resp, err)
		}
		first := entryByID(t, srv, a)
		err := rc.send(b, "", false)
		sent := clock.Mono()
		if err == nil {
			var resp *http.Response
			if resp, _, err = rc.response(); err == nil && resp.StatusCode == 200 {
				c, second = rc, entryByID(t, srv, b)
				break
			}
		}
		// The server's idle period began after the first entry was
		// recorded, so a request written within idle of that was early.
		if sent < first.DoneMonoNs+int64(idle) {
			t.Fatalf("request sent %v after the previous response was recorded, within the idle time %v, failed: %v",
				time.Duration(sent-first.DoneMonoNs), idle, err)
		}
		if attempt == 5 {
			t.Fatalf("the client never managed to send a request within %v of the previous response (machine too slow?)", idle)
		}
		t.Logf("attempt %d: the second request went out only %v after the first response; retrying", attempt, time.Duration(sent-first.DoneMonoNs))
		rc.conn.Close()
	}

	n, err := c.readEnd()
	closedAt := clock.Mono()
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection ended after %d bytes with %v, want 0 bytes and EOF (a FIN)", n, err)
	}
	if closedAt < second.DoneMonoNs+int64(idle) {
		t.Fatalf("connection closed %v after the last response was recorded, before the idle time %v", time.Duration(closedAt-second.DoneMonoNs), idle)
	}
	if got := srv.m.idleCloses.Load(); got < 1 {
		t.Fatalf("idle closes counter %d", got)
	}
	// A pooled client that did not notice the FIN sends anyway.
	if err := c.send("late", "", false); err == nil {
		if n, err := c.readEnd(); n != 0 || !closedConnError(err) {
			t.Fatalf("request on the closed connection: %d bytes, %v", n, err)
		}
	}

	// The same without reading first: the client writes once the server
	// has closed, and sees the connection end before any response byte.
	d := dialRaw(t, srv)
	before := srv.m.idleCloses.Load()
	d.send("d", "", false)
	if _, _, err := d.response(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle close", func() bool { return srv.m.idleCloses.Load() > before })
	if err := d.send("e", "", true); err == nil {
		if n, err := d.readEnd(); n != 0 || !closedConnError(err) {
			t.Fatalf("request after the idle close: %d bytes, %v; want none and EOF or a reset", n, err)
		}
	}
	for _, e := range srv.Log() {
		if e.RequestID == "late" || e.RequestID == "e" {
			t.Fatalf("a request sent after the idle close reached the server: %+v", e)
		}
	}
}

// TestIdleCloseFault: the idleclose fault gives only its own connection
// the idle close; another connection idle for longer stays usable.
func TestIdleCloseFault(t *testing.T) {
	const idle = 300 * time.Millisecond
	srv := startMock(t, nil)
	other := dialRaw(t, srv)
	other.send("other", "", false)
	if _, _, err := other.response(); err != nil {
		t.Fatal(err)
	}
	otherDone := entryByID(t, srv, "other").DoneMonoNs

	c := dialRaw(t, srv)
	c.send("ic", "idleclose="+idle.String(), true)
	resp, _, err := c.response()
	if err != nil || resp.StatusCode != 200 || resp.Close || resp.Header.Get("Connection") != "" {
		t.Fatalf("response %+v, %v: want a kept-alive 200", resp, err)
	}
	e := entryByID(t, srv, "ic")
	if e.Fault != "idleclose=300ms" || e.Outcome != OutcomeOK {
		t.Fatalf("entry fault %q outcome %s", e.Fault, e.Outcome)
	}
	n, err := c.readEnd()
	closedAt := clock.Mono()
	if n != 0 || !errors.Is(err, io.EOF) || closedAt < e.DoneMonoNs+int64(idle) {
		t.Fatalf("ended after %d bytes with %v, %v after the response; want EOF no sooner than %v", n, err, time.Duration(closedAt-e.DoneMonoNs), idle)
	}
	if closedAt-otherDone < int64(idle) {
		t.Fatal("ordering broken: the other connection has not been idle for the idle time")
	}
	other.send("other2", "", false)
	if resp, _, err := other.response(); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the other connection, idle longer than %v without the fault, was closed: %v", idle, err)
	}
}

// TestCloseAfterResponse: the connection ends right after a complete
// response that did not say Connection: close, per request (the fault, on
// a stream) and server-wide (any response, here /health and a unary).
func TestCloseAfterResponse(t *testing.T) {
	check := func(t *testing.T, c *rawConn, what string) {
		t.Helper()
		resp, _, err := c.response()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v, %v", what, resp, err)
		}
		if resp.Close || resp.Header.Get("Connection") != "" {
			t.Fatalf("%s: the response announced the close (Connection %q)", what, resp.Header.Get("Connection"))
		}
		if n, err := c.readEnd(); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("%s: after the response %d bytes, %v; want EOF", what, n, err)
		}
	}
	t.Run("fault", func(t *testing.T) {
		srv := startMock(t, nil)
		c := dialRaw(t, srv)
		c.send("ca", "closeafter", true)
		check(t, c, "stream with closeafter")
		if e := entryByID(t, srv, "ca"); e.Fault != "closeafter" || e.Outcome != OutcomeOK || len(e.EventMonoNs) != 4 {
			t.Fatalf("entry %+v", e)
		}
		if n := srv.m.closedAfterResponse.Load(); n != 1 {
			t.Fatalf("closed-after-response counter %d", n)
		}
	})
	t.Run("server", func(t *testing.T) {
		srv := startMock(t, func(c *Config) { c.CloseAfterResponse = true })
		c := dialRaw(t, srv)
		io.WriteString(c.conn, "GET /health HTTP/1.1\r\nHost: mock\r\n\r\n")
		check(t, c, "/health")
		c = dialRaw(t, srv)
		c.send("u", "", false)
		check(t, c, "unary")
		if e := entryByID(t, srv, "u"); e.Fault != "" || e.Outcome != OutcomeOK {
			t.Fatalf("entry %+v", e)
		}
	})
}
