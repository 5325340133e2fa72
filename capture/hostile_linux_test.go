package capture

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// TestProxyFINWithLastData: an upstream whose last bytes (an incomplete
// body) and FIN travel in one segment (TCP_CORK, then close), so that the
// proxy's socket becomes readable once for both. The client still sees
// the events, then the cut, at once (not at a timeout), and the record
// says truncated.
func TestProxyFINWithLastData(t *testing.T) {
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		io.WriteString(c, sseHead)
		time.Sleep(30 * time.Millisecond) // the proxy waits for the body
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Error(err)
			return false
		}
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1) })
		io.WriteString(c, chunk(sseEvent("a"))+chunk(sseEvent("b")))
		return false // closed with the data still corked: data and FIN together
	})
	ps, _ := startProxy(t, up.URL(), nil)
	for i := range 5 {
		c, err := net.Dial("tcp", strings.TrimPrefix(ps.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second)) // hang guard
		resp, b, err := rawRequest(t, c, bufio.NewReader(c), chatRequest("fin", chatBody([]msg{{"user", "x"}}, true)))
		c.Close()
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
