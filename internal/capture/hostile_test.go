package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/trace"
)

// hostileServer is an upstream written against the socket: each request
// is read with http.ReadRequest and answered by handle, which writes
// whatever bytes it likes and says whether to keep the connection.
type hostileServer struct {
	ln      net.Listener
	accepts atomic.Int32
	wg      sync.WaitGroup
}

func startHostile(t *testing.T, handle func(c net.Conn, br *bufio.Reader, r *http.Request) bool) *hostileServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileServer{ln: ln}
	var mu sync.Mutex
	var conns []net.Conn
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepts.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			h.wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if !handle(c, br, r) {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		h.wg.Wait()
	})
	return h
}

func (h *hostileServer) URL() string { return "http://" + h.ln.Addr().String() }

// readBody consumes a request's body so that the next request can be read.
func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

func sseEvent(content string) string {
	return fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", content)
}

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// dialProxy connects to the proxy, the connection closed when the test
// ends; guard is its deadline, a hang guard (not a budget).
func dialProxy(t *testing.T, ps *ProxyServer, guard time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ps.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(guard))
	return c
}

// closeWantClean closes ps and checks its recording: n records, each
// without error and with events events.
func closeWantClean(t *testing.T, ps *ProxyServer, n, events int) {
	t.Helper()
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	for _, r := range recs {
		if r.ErrorKind != "" || len(r.EventNs) != events {
			t.Errorf("record %s: error %q %q, %d events; want none and %d", r.RequestID, r.ErrorKind, r.ErrorMessage, len(r.EventNs), events)
		}
	}
}

// rawRequest sends one request on c and reads its response.
func rawRequest(t *testing.T, c net.Conn, br *bufio.Reader, req string) (*http.Response, []byte, error) {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		return nil, nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func chatRequest(id, body string) string {
	return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", id, secret, len(body), body)
}

// TestProxyHostileUpstreams: an upstream that trickles its chunked stream
// byte by byte, one that closes mid-stream, one whose Content-Length lies
// both ways, one that compresses a Content-Length body, one that sends
// garbage instead of a head, and one whose head never ends. The client
// gets each byte the upstream sent for its response and no other, a cut
// when the upstream cut, a 502 with a reason when there was no response
// (or a head too large to read); each record says what happened.
func TestProxyHostileUpstreams(t *testing.T) { eachStack(t, testProxyHostileUpstreams) }

func testProxyHostileUpstreams(t *testing.T, stack h1proxy.Stack) {
	events := sseEvent("a") + sseEvent("b") + "data: [DONE]\n\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, `{"choices":[{"message":{"role":"assistant","content":"zipped"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`)
	zw.Close()
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		switch id := r.Header.Get("X-Request-Id"); id {
		case "trickle":
			wire := sseHead + chunk(events) + "0\r\n\r\n"
			for i := range len(wire) {
				if _, err := c.Write([]byte{wire[i]}); err != nil {
					return false
				}
				if i%16 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			return true
		case "cut":
			// The head first, then both events and the FIN together: the
			// end of file comes with the last data, no later.
			io.WriteString(c, sseHead)
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, chunk(sseEvent("a"))+chunk(sseEvent("b")))
			return false
		case "short":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"choices\":[")
			return false
		case "long":
			// Closed after: Go's Transport (the net/http stack) can hand
			// the next request to this connection before its read loop
			// has seen the stray bytes, and that request then reads them
			// as its response (seen once in a loaded make test).
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n0123456789EXTRA-BYTES-NOT-IN-THE-BODY")
			return false
		case "gzip":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", gz.Len())
			c.Write(gz.Bytes())
			return true
		case "garbage":
			io.WriteString(c, "SPDY/9 what\r\n\r\n")
			return false
		case "endless":
			// A head that never ends (bounded here at 64 MiB).
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Endless: ")
			line := bytes.Repeat([]byte("a"), 64<<10)
			for range 1024 {
				if _, err := c.Write(line); err != nil {
					break
				}
			}
			return false
		}
		return false
	})
	var logMu sync.Mutex
	var logs bytes.Buffer
	ps, dir := startProxy(t, stack, up.URL(), func(c *ProxyConfig) {
		c.Logf = func(f string, a ...any) { logMu.Lock(); fmt.Fprintf(&logs, f+"\n", a...); logMu.Unlock() }
	})
	addr := strings.TrimPrefix(ps.URL(), "http://")
	send := func(id string, stream bool) (*http.Response, []byte, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second)) // hang guard
		return rawRequest(t, c, bufio.NewReader(c), chatRequest(id, chatBody([]msg{{"user", id}}, stream)))
	}
	if resp, b, err := send("trickle", true); err != nil || resp.StatusCode != 200 || string(b) != events {
		t.Fatalf("trickle: %v %q", err, b)
	}
	if resp, b, err := send("cut", true); err == nil || os.IsTimeout(err) || resp.StatusCode != 200 || string(b) != sseEvent("a")+sseEvent("b") {
		t.Fatalf("cut: the client got %q, err %v; want both events, then the cut", b, err)
	}
	if _, b, err := send("short", false); err == nil || os.IsTimeout(err) || string(b) != "{\"choices\":[" {
		t.Fatalf("short: the client got %q, err %v; want the bytes sent, then the cut", b, err)
	}
	if resp, b, err := send("long", false); err != nil || resp.ContentLength != 10 || string(b) != "0123456789" {
		t.Fatalf("long: %q %v; want exactly the 10 bytes announced", b, err)
	}
	if resp, b, err := send("gzip", false); err != nil || resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(b, gz.Bytes()) {
		t.Fatalf("gzip: %v, body equal %v", err, bytes.Equal(b, gz.Bytes()))
	}
	if resp, b, err := send("garbage", true); err != nil || resp.StatusCode != http.StatusBadGateway || !bytes.Contains(b, []byte("malformed HTTP")) {
		t.Fatalf("garbage head: %v %q; want a 502 saying why", err, b)
	}
	// Each stack says it in its own words, both bounding the head at 1 MiB.
	tooLarge := map[h1proxy.Stack]string{h1proxy.Native: "response head larger than 1048576 bytes", h1proxy.NetHTTP: "response headers exceeded 1048576 bytes"}[stack]
	if resp, b, err := send("endless", true); err != nil || resp.StatusCode != http.StatusBadGateway || !bytes.Contains(b, []byte(tooLarge)) {
		t.Fatalf("endless head: %v %q; want a 502 saying why", err, b)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	got := map[string]trace.Record{}
	for _, r := range recs {
		got[r.RequestID] = r
	}
	for id, want := range map[string]trace.ErrorKind{
		"trickle": "", "cut": trace.ErrStreamTruncated, "short": trace.ErrStreamTruncated,
		"long": trace.ErrMalformed, "gzip": "", "garbage": trace.ErrConnect, "endless": trace.ErrConnect,
	} {
		r, ok := got[id]
		if !ok || r.ErrorKind != want {
			t.Errorf("%s: recorded %v as %q (%s), want %q", id, ok, r.ErrorKind, r.ErrorMessage, want)
		}
	}
	if r := got["trickle"]; len(r.EventNs) != 2 {
		t.Errorf("trickle: %d events, want 2", len(r.EventNs))
	}
	if r := got["gzip"]; r.CompletionTokens != 4 || len(r.EventNs) != 1 {
		t.Errorf("gzip: %+v", r)
	}
	noSecretIn(t, dir)
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("a log line holds the API key:\n%s", logs.String())
	}
}

// TestProxyKeepAlive: requests one after another on one client connection
// share one upstream connection; an upstream that closes its idle
// connection costs nothing (the request goes on a new one); an upstream
// that sent more than its Content-Length is not reused.
func TestProxyKeepAlive(t *testing.T) { eachStack(t, testProxyKeepAlive) }

func testProxyKeepAlive(t *testing.T, stack h1proxy.Stack) {
	var closeNext atomic.Bool
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		// Decided before answering: the client changes closeNext once it
		// has the answer, which a read after writing could see.
		keep := !closeNext.Load()
		body := sseEvent("k") + "data: [DONE]\n\n"
		io.WriteString(c, sseHead+chunk(body)+"0\r\n\r\n")
		return keep
	})
	ps, _ := startProxy(t, stack, up.URL(), nil)
	c := dialProxy(t, ps, 20*time.Second)
	br := bufio.NewReader(c)
	for i := range 3 {
		resp, b, err := rawRequest(t, c, br, chatRequest(fmt.Sprintf("ka-%d", i), chatBody([]msg{{"user", "k"}}, true)))
		if err != nil || resp.StatusCode != 200 || !bytes.Contains(b, []byte("[DONE]")) || resp.Close {
			t.Fatalf("request %d: %v %q", i, err, b)
		}
	}
	if n := up.accepts.Load(); n != 1 {
		t.Fatalf("3 requests in a row took %d upstream connections, want 1", n)
	}
	// The upstream closes after answering: the idle connection the proxy
	// keeps is dead, and the next request still succeeds.
	closeNext.Store(true)
	rawRequest(t, c, br, chatRequest("ka-close", chatBody([]msg{{"user", "k"}}, true)))
	closeNext.Store(false)
	time.Sleep(20 * time.Millisecond) // let the FIN arrive (the retry covers it either way)
	resp, b, err := rawRequest(t, c, br, chatRequest("ka-after", chatBody([]msg{{"user", "k"}}, true)))
	if err != nil || resp.StatusCode != 200 || !bytes.Contains(b, []byte("[DONE]")) {
		t.Fatalf("after the upstream closed its idle connection: %v %q", err, b)
	}
	if n := up.accepts.Load(); n != 2 {
		t.Fatalf("%d upstream connections, want 2", n)
	}
	closeWantClean(t, ps, 5, 1)
}

// TestProxyHeadersAndBodies: hop-by-hop headers (and those Connection
// names) are removed both ways, end-to-end ones and the API key reach the
// upstream; a non-LLM request body streams upstream before the client has
// sent all of it; an HTTP/1.0 client gets a chunked upstream's body
// de-chunked, then the connection closes.
func TestProxyHeadersAndBodies(t *testing.T) { eachStack(t, testProxyHeadersAndBodies) }

func testProxyHeadersAndBodies(t *testing.T, stack h1proxy.Stack) {
	gotFirst := make(chan struct{})
	var upHeader http.Header
	var upBody []byte
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		switch r.URL.Path {
		case "/upload":
			buf := make([]byte, 5)
			if _, err := io.ReadFull(r.Body, buf); err != nil {
				return false
			}
			close(gotFirst) // the first part arrived alone
			rest, _ := io.ReadAll(r.Body)
			upHeader, upBody = r.Header, append(buf, rest...)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-End: 2\r\nContent-Length: 2\r\n\r\nok")
			return true
		default:
			readBody(r)
			io.WriteString(c, sseHead+chunk("data: one\n\n")+chunk("data: two\n\n")+"0\r\n\r\n")
			return true
		}
	})
	ps, _ := startProxy(t, stack, up.URL(), nil)
	addr := strings.TrimPrefix(ps.URL(), "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+secret+"\r\nConnection: X-Private\r\nX-Private: p\r\nKeep-Alive: 1\r\nTE: trailers\r\nX-End: e\r\nTransfer-Encoding: chunked\r\n\r\n"+chunk("first"))
	select {
	case <-gotFirst:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream did not get the body's first part before the client sent the rest")
	}
	io.WriteString(c, chunk(" second")+"0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "ok" || resp.Header.Get("X-End") != "2" || resp.Header.Get("X-Hop") != "" || resp.Header.Get("Keep-Alive") != "" {
		t.Fatalf("response %q headers %v", b, resp.Header)
	}
	if string(upBody) != "first second" {
		t.Fatalf("upstream got body %q", upBody)
	}
	for _, h := range []string{"X-Private", "Keep-Alive", "Te"} {
		if upHeader.Get(h) != "" {
			t.Errorf("upstream got hop-by-hop header %s", h)
		}
	}
	if upHeader.Get("X-End") != "e" || upHeader.Get("Authorization") != "Bearer "+secret {
		t.Errorf("upstream headers %v", upHeader)
	}

	c10, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c10.Close()
	c10.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c10, "GET /events HTTP/1.0\r\nHost: x\r\n\r\n")
	all, err := io.ReadAll(c10) // the proxy closes after the body
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(all), "\r\n\r\n")
	if body != "data: one\n\ndata: two\n\n" || strings.Contains(head, "chunked") {
		t.Fatalf("HTTP/1.0 client got head %q body %q", head, body)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProxyClientGoneReachesUpstream: a client that disconnects while the
// upstream is still silent (prefill) makes the proxy close its upstream
// connection at once, and the record says canceled.
func TestProxyClientGoneReachesUpstream(t *testing.T) {
	eachStack(t, testProxyClientGoneReachesUpstream)
}

func testProxyClientGoneReachesUpstream(t *testing.T, stack h1proxy.Stack) {
	upSawEOF := make(chan struct{})
	arrived := make(chan struct{})
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		close(arrived)
		c.SetReadDeadline(time.Now().Add(15 * time.Second)) // hang guard
		if _, err := br.ReadByte(); err == io.EOF {
			close(upSawEOF)
		}
		return false
	})
	ps, _ := startProxy(t, stack, up.URL(), nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(ps.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, chatRequest("gone", chatBody([]msg{{"user", "x"}}, true)))
	<-arrived
	c.Close()
	select {
	case <-upSawEOF:
	case <-time.After(15 * time.Second):
		t.Fatal("the upstream connection stayed open after the client went away")
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != 1 || recs[0].ErrorKind != trace.ErrCanceled {
		t.Fatalf("records %+v", recs)
	}
}

// TestProxyForwardAllocsPerEvent: forwarding and recording a stream
// allocates per request, not per event: a 2,000-event stream costs a few
// dozen allocations more than a 10-event one (buffers growing by
// doubling), not one per event, measured over the whole process (upstream and client here
// write and read raw bytes without allocating). Token counting, done off
// the forwarding path when the request ends, is left out: a tokenizer
// that counts bytes stands in for the real one.
func TestProxyForwardAllocsPerEvent(t *testing.T) {
	ev := chunk(sseEvent("tok"))
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		n := 10
		if r.Header.Get("X-Request-Id") == "long" {
			n = 2000
		}
		io.WriteString(c, sseHead)
		b := []byte(ev)
		for range n {
			if _, err := c.Write(b); err != nil {
				return false
			}
		}
		io.WriteString(c, chunk("data: [DONE]\n\n")+"0\r\n\r\n")
		return true
	})
	// The native stack only: forwarding without an allocation per read is
	// its promise; net/http's server and transport make no such promise.
	ps, _ := startProxy(t, h1proxy.Native, up.URL(), func(c *ProxyConfig) { c.Tokenizer = byteTok{}; c.SyncEvery = time.Hour })
	defer ps.Close()
	c := dialProxy(t, ps, 60*time.Second)
	br := bufio.NewReaderSize(c, 64<<10)
	reqs := map[string][]byte{}
	for _, id := range []string{"short", "long"} {
		reqs[id] = []byte(chatRequest(id, chatBody([]msg{{"user", "allocs"}}, true)))
	}
	buf := make([]byte, 64<<10)
	do := func(id string) {
		c.Write(reqs[id])
		// Read the response to its last chunk, without net/http.
		var tail []byte
		for !bytes.HasSuffix(tail, []byte("\r\n0\r\n\r\n")) {
			n, err := br.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			tail = append(tail[:0], buf[max(0, n-16):n]...)
		}
	}
	// The fewest allocations of several requests: the process's
	// background work (timers, the runtime) only ever adds to a run.
	measure := func(id string) float64 {
		do(id) // warm
		least := uint64(1 << 62)
		var m0, m1 runtime.MemStats
		for range 10 {
			runtime.ReadMemStats(&m0)
			do(id)
			runtime.ReadMemStats(&m1)
			least = min(least, m1.Mallocs-m0.Mallocs)
		}
		return float64(least)
	}
	short, long := measure("short"), measure("long")
	if perEvent := (long - short) / 1990; perEvent > 0.05 {
		t.Fatalf("%.1f allocations per 10-event request, %.1f per 2,000-event one: %.3f per event", short, long, perEvent)
	}
	t.Logf("%.1f allocations per 10-event request, %.1f per 2,000-event one", short, long)
}

// byteTok counts a token per 4 bytes and allocates nothing.
type byteTok struct{}

func (byteTok) Name() string              { return "bytes/4" }
func (byteTok) Encode(text string) []uint { return make([]uint, (len(text)+3)/4) }
func (byteTok) Decode(ids []uint) string  { return "" }
func (byteTok) Count(text string) int     { return (len(text) + 3) / 4 }

// TestProxyRequestHeadBounded: a client whose request head never ends
// gets a 431 once it sent requestHeadBound bytes, not a proxy that keeps
// them all.
func TestProxyRequestHeadBounded(t *testing.T) { eachStack(t, testProxyRequestHeadBounded) }

func testProxyRequestHeadBounded(t *testing.T, stack h1proxy.Stack) {
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		t.Errorf("the upstream got a request: %s", r.URL)
		return false
	})
	ps, _ := startProxy(t, stack, up.URL(), nil)
	c := dialProxy(t, ps, 20*time.Second)
	go func() {
		io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Endless: ")
		line := bytes.Repeat([]byte("a"), 64<<10)
		for range 4 * requestHeadBound / len(line) {
			if _, err := c.Write(line); err != nil {
				return // the proxy closed the connection
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	why := map[h1proxy.Stack]string{h1proxy.Native: "request head larger than", h1proxy.NetHTTP: "Request Header Fields Too Large"}[stack]
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !bytes.Contains(b, []byte(why)) {
		t.Fatalf("status %d, body %q; want 431 saying why", resp.StatusCode, b)
	}
}

// TestProxyPipelinedRequests: a client that sends its next request before
// the first one's response (HTTP/1.1 pipelining) gets both responses, in
// order, on its connection, and both are recorded; the second request
// waiting in the connection's buffer is not taken for a disconnect.
func TestProxyPipelinedRequests(t *testing.T) { eachStack(t, testProxyPipelinedRequests) }

func testProxyPipelinedRequests(t *testing.T, stack h1proxy.Stack) {
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		id := r.Header.Get("X-Request-Id")
		io.WriteString(c, sseHead)
		time.Sleep(20 * time.Millisecond) // the next request is in the proxy's buffer by now
		io.WriteString(c, chunk(sseEvent(id))+chunk("data: [DONE]\n\n")+"0\r\n\r\n")
		return true
	})
	ps, _ := startProxy(t, stack, up.URL(), nil)
	c := dialProxy(t, ps, 20*time.Second)
	io.WriteString(c, chatRequest("first", chatBody([]msg{{"user", "1"}}, true))+chatRequest("second", chatBody([]msg{{"user", "2"}}, true)))
	br := bufio.NewReader(c)
	for _, id := range []string{"first", "second"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != sseEvent(id)+"data: [DONE]\n\n" {
			t.Fatalf("%s: body %q, %v", id, b, err)
		}
	}
	closeWantClean(t, ps, 2, 1)
}

// requestHeadBound is the most a request head may take on either stack
// (the native server's bound, net/http's default).
const requestHeadBound = 1 << 20
