package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/trace"
)

// TestProxyFINWithLastData: an upstream whose last bytes (an incomplete
// body) and FIN travel in one segment (TCP_CORK, then close), so that the
// proxy's socket becomes readable once for both. The client still sees
// the events, then the cut, at once (not at a timeout), and the record
// says truncated.
func TestProxyFINWithLastData(t *testing.T) { eachStack(t, testProxyFINWithLastData) }

func testProxyFINWithLastData(t *testing.T, stack h1proxy.Stack) {
	up := finWithLastData(t, sseHead, []byte(chunk(sseEvent("a"))+chunk(sseEvent("b"))))
	ps, _ := startProxy(t, stack, up.URL(), nil)
	for i := range 5 {
		resp, b, err := freshRequest(t, ps, "fin")
		if err == nil || os.IsTimeout(err) || resp.StatusCode != 200 || string(b) != sseEvent("a")+sseEvent("b") {
			t.Fatalf("try %d: the client got %q, err %v; want both events, then the cut", i, b, err)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	for _, r := range recs {
		if r.ErrorKind != trace.ErrStreamTruncated || len(r.EventNs) != 2 {
			t.Fatalf("record %+v", r)
		}
	}
}

// TestProxyFINWithLastDataOnGoroutine: the same FIN with the last data on
// a body its request's goroutine reads (a gzip-compressed one, delimited
// by the upstream's close), after it waited for the body's first bytes.
// The goroutine's short read of those bytes must not be taken as having
// drained the socket: the end of file that came with them is read at once
// (no hang), the client gets every byte, and the record is complete.
func TestProxyFINWithLastDataOnGoroutine(t *testing.T) {
	eachStack(t, testProxyFINWithLastDataOnGoroutine)
}

func testProxyFINWithLastDataOnGoroutine(t *testing.T, stack h1proxy.Stack) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, sseEvent("a")+sseEvent("b")+"data: [DONE]\n\n")
	zw.Close()
	up := finWithLastData(t, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n", gz.Bytes())
	ps, _ := startProxy(t, stack, up.URL(), nil)
	for i := range 5 {
		resp, b, err := freshRequest(t, ps, "fin-gz")
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, gz.Bytes()) {
			t.Fatalf("try %d: the client got %d bytes (want %d), err %v", i, len(b), gz.Len(), err)
		}
	}
	closeWantClean(t, ps, 5, 2)
}

// corkedWrite writes b with TCP_CORK set, so that a close right after
// sends the data and the FIN in one segment.
func corkedWrite(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Error(err)
		return
	}
	rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1) })
	c.Write(b)
}

// finWithLastData starts an upstream that answers every request with head,
// waits so that the proxy is waiting for the body, then writes body corked
// and closes: the data and the FIN arrive together.
func finWithLastData(t *testing.T, head string, body []byte) *hostileServer {
	return startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		io.WriteString(c, head)
		time.Sleep(30 * time.Millisecond) // the proxy waits for the body
		corkedWrite(t, c, body)
		return false
	})
}

// freshRequest sends one streamed chat request with id through ps on a
// new connection (closed after), with a hang guard.
func freshRequest(t *testing.T, ps *ProxyServer, id string) (*http.Response, []byte, error) {
	c := dialProxy(t, ps, 10*time.Second)
	defer c.Close()
	return rawRequest(t, c, bufio.NewReader(c), chatRequest(id, chatBody([]msg{{"user", "x"}}, true)))
}
