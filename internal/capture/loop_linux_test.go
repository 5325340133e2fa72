package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// TestProxySlowClientOnLoop: a client that reads nothing while a 10 MB
// stream is forwarded (its receive buffer kept small), so that the loop's
// writes find the client socket full and hand the body back to its
// goroutine with the bytes not yet written; the stream is chunked on a
// kept connection, or delimited by its Content-Length on a connection the
// upstream closes after it. The client then gets every byte in order, the
// connection stays usable for a next request, and the record has every
// event and no error.
func TestProxySlowClientOnLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	for _, mode := range []string{"chunked", "length-close"} {
		t.Run(mode, func(t *testing.T) { slowClientOnLoop(t, mode) })
	}
}

func slowClientOnLoop(t *testing.T, mode string) {
	events, size := 5000, 2<<10
	content := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), size) }
	var written atomic.Int64
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		if r.Header.Get("X-Request-Id") == "next" {
			io.WriteString(c, sseHead+chunk(sseEvent("n"))+chunk("data: [DONE]\n\n")+"0\r\n\r\n")
			return true
		}
		frame := chunk
		if mode == "length-close" {
			frame = func(s string) string { return s }
			n := len("data: [DONE]\n\n")
			for i := range events {
				n += len(sseEvent(content(i)))
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", n)
		} else {
			io.WriteString(c, sseHead)
		}
		for i := range events {
			n, err := io.WriteString(c, frame(sseEvent(content(i))))
			written.Add(int64(n))
			if err != nil {
				return false
			}
		}
		io.WriteString(c, frame("data: [DONE]\n\n"))
		if mode == "length-close" {
			return false
		}
		io.WriteString(c, "0\r\n\r\n")
		return true
	})
	// a tokenizer that counts bytes: the real one would spend its time on
	// the 10 MB answer
	// The native stack only: the loop's hand-back of a body to its
	// request's goroutine is what this exercises.
	ps, _ := startProxy(t, h1proxy.Native, up.URL(), func(c *ProxyConfig) { c.Tokenizer = byteTok{} })
	rcvbuf := 64 << 10
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(ps.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(120 * time.Second)) // hang guard
	if _, err := io.WriteString(c, chatRequest("slow", chatBody([]msg{{"user", "x"}}, true))); err != nil {
		t.Fatal(err)
	}
	// Read nothing until the upstream stalls: every buffer on the way is
	// full, the proxy's write to this client among them.
	for last := int64(-1); ; {
		time.Sleep(200 * time.Millisecond)
		n := written.Load()
		if n == last && n > 0 {
			break
		}
		last = n
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range events {
		want.WriteString(sseEvent(content(i)))
	}
	want.WriteString("data: [DONE]\n\n")
	if !bytes.Equal(got, want.Bytes()) {
		i := 0
		for i < min(len(got), want.Len()) && got[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("the client got %d bytes, want %d; first difference at byte %d", len(got), want.Len(), i)
	}
	_, b, err := rawRequest(t, c, br, chatRequest("next", chatBody([]msg{{"user", "y"}}, true)))
	if err != nil || string(b) != sseEvent("n")+"data: [DONE]\n\n" {
		t.Fatalf("next request on the connection: %q, %v", b, err)
	}
	p := ps.Proxy()
	st := ps.stack.LoopStats()
	bodies, handbacks := st.Bodies, st.Handbacks
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, p.Segments()[0].Recording)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		n := 1
		if r.RequestID == "slow" {
			n = events
		}
		if r.ErrorKind != "" || len(r.EventNs) != n {
			t.Fatalf("record %s: %d events, error %q %q; want %d events and none", r.RequestID, len(r.EventNs), r.ErrorKind, r.ErrorMessage, n)
		}
	}
	// The next response can come whole with its head (then its goroutine
	// forwards it from the head's buffer).
	if bodies < 1 {
		t.Fatalf("%d bodies went to the loop, want the slow one at least", bodies)
	}
	t.Logf("%d bodies on the loop, %d handed back to their goroutine", bodies, handbacks)
}

// TestProxyLateParseKeepsEachReadsStamp: the loop forwards an event stream
// without parsing it, and its pieces are parsed later, in bulk (pendMax at
// a time, the rest when the body ends). The upstream sends each of 150
// events only once the client has read the one before, so every event
// arrives in its own read: its recorded stamp must lie after the client's
// read of the previous event and before the client's read of itself, and
// the recording must hold every event's text (a stream four times
// pendMax, so it is parsed in several parts).
func TestProxyLateParseKeepsEachReadsStamp(t *testing.T) {
	eachStack(t, testProxyLateParseKeepsEachReadsStamp)
}

func testProxyLateParseKeepsEachReadsStamp(t *testing.T, stack h1proxy.Stack) {
	const n = 150
	ack := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"e%03d %s\"}}]}\n\n", i, strings.Repeat("x", 64))
			w.(http.Flusher).Flush()
			select {
			case <-ack:
			case <-time.After(10 * time.Second):
				return
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	ps, _ := startProxy(t, stack, up.URL, nil)
	req, _ := http.NewRequest("POST", ps.URL()+"/v1/chat/completions", strings.NewReader(chatBody([]msg{{"user", "late"}}, true)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var client []int64
	var want strings.Builder
	for i := range n {
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, fmt.Sprintf("e%03d", i)) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		client = append(client, clockMono())
		fmt.Fprintf(&want, "e%03d %s", i, strings.Repeat("x", 64))
		ack <- struct{}{}
	}
	io.ReadAll(br)
	resp.Body.Close()
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, meta := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != 1 || len(recs[0].EventNs) != n || recs[0].ErrorKind != "" {
		t.Fatalf("records %+v", recs)
	}
	for i, ts := range recs[0].EventNs {
		abs := ts + meta.StartMonoNs
		if abs > client[i] || i > 0 && abs < client[i-1] {
			t.Fatalf("event %d stamped %d: want after the client's read of event %d (%d) and before its read of this one (%d)", i, abs, i-1, client[max(i-1, 0)], client[i])
		}
	}
	rows := readTrace(t, ps.Proxy().Segments()[0].Trace)
	if len(rows) != 1 || rows[0].ReferenceAnswer != want.String() {
		t.Fatalf("answer %q, want %q", rows[0].ReferenceAnswer, want.String())
	}
}

// TestRecorderPendingIsBounded: a late-parsed stream never holds more
// than pendMax bytes unparsed (plus the piece that crossed it), and what
// it parsed on the way plus the rest at the end is every event.
func TestRecorderPendingIsBounded(t *testing.T) {
	var res fwdResult
	stream := record.NewStream(nil)
	rc := recorder{stream: stream}
	rc.init(&res, true, "")
	rc.late = true
	piece := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("y", 90) + "\"}}]}\n\n")
	for i := range 200 {
		rc.feed(piece, int64(i+1))
		if rc.pend != nil && len(rc.pend.b) >= pendMax {
			t.Fatalf("after piece %d: %d bytes unparsed, want < %d", i, len(rc.pend.b), pendMax)
		}
	}
	rc.end(true, 201)
	var rec trace.Record
	stream.Fill(&rec)
	if len(rec.EventNs) != 200 || rec.EventNs[0] != 1 || rec.EventNs[199] != 200 {
		t.Fatalf("%d events, first %v", len(rec.EventNs), rec.EventNs[:min(3, len(rec.EventNs))])
	}
}

// TestLoopReadsPlainHeads: the loop parses a plain response head itself
// and writes it to the client with the first events; every other head
// (compressed, informational first, bare LF line ends, HTTP/1.0
// close-delimited) is handed back to the request's goroutine with the
// bytes the loop read, and net/http reads it as before. Either way the
// client gets the upstream's status, headers and body, and each record
// its events. A body that ended with its head but had bytes after it
// does not leave its connection to be reused.
func TestLoopReadsPlainHeads(t *testing.T) {
	events := sseEvent("a") + sseEvent("b") + "data: [DONE]\n\n"
	chunked := chunk(sseEvent("a")) + chunk(sseEvent("b")) + chunk("data: [DONE]\n\n") + "0\r\n\r\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, events)
	zw.Close()
	cases := []struct {
		name, answer string
		plain        bool
		status       int
		body         string
	}{
		{"plain", sseHead + chunked, true, 200, events},
		{"split", sseHead + chunked, true, 200, events}, // sent in two writes
		{"json", "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nX-Case: json\r\nContent-Length: 11\r\n\r\n{\"error\":1}", true, 400, `{"error":1}`},
		{"empty-extra", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nGARBAGE", true, 200, ""},
		{"gzip", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nContent-Length: " + fmt.Sprint(gz.Len()) + "\r\n\r\n" + gz.String(), false, 200, gz.String()},
		{"continue", "HTTP/1.1 100 Continue\r\n\r\n" + sseHead + chunked, false, 200, events},
		{"bare-lf", "HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n\n" + chunked, false, 200, events},
		{"http10", "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + events, false, 200, events},
	}
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		for _, k := range cases {
			if r.Header.Get("X-Request-Id") != k.name {
				continue
			}
			if k.name == "split" {
				io.WriteString(c, k.answer[:20])
				time.Sleep(20 * time.Millisecond) // the head comes in two reads, or one: the same result
				io.WriteString(c, k.answer[20:])
				return true
			}
			io.WriteString(c, k.answer)
			return !strings.HasPrefix(k.answer, "HTTP/1.0") // empty-extra's stays open: reused, it would answer the next request with GARBAGE
		}
		return false
	})
	// The native stack only: its event loop's own head parser is what this
	// exercises.
	ps, _ := startProxy(t, h1proxy.Native, up.URL(), nil)
	c := dialProxy(t, ps, 30*time.Second)
	br := bufio.NewReader(c)
	plain := 0
	for _, k := range cases {
		resp, b, err := rawRequest(t, c, br, chatRequest(k.name, chatBody([]msg{{"user", k.name}}, true)))
		if err != nil || resp.StatusCode != k.status || string(b) != k.body {
			t.Fatalf("%s: status %v, body %q, %v; want %d, %q", k.name, resp, b, err, k.status, k.body)
		}
		if k.name == "json" && resp.Header.Get("X-Case") != "json" {
			t.Errorf("json: headers %v", resp.Header)
		}
		if k.name == "gzip" && resp.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("gzip: headers %v", resp.Header)
		}
		if k.plain {
			plain++
		}
	}
	p := ps.Proxy()
	st := ps.stack.LoopStats()
	heads, backs := st.Heads, st.HeadBacks
	if heads != int64(plain) || backs != int64(len(cases)-plain) {
		t.Errorf("the loop parsed %d heads and handed back %d, want %d and %d", heads, backs, plain, len(cases)-plain)
	}
	// One kept upstream connection up to empty-extra's, which is not
	// reused (the bytes after its body), then another.
	if n := up.accepts.Load(); n != 2 {
		t.Errorf("%d upstream connections, want 2", n)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, p.Segments()[0].Recording)
	if len(recs) != len(cases) {
		t.Fatalf("%d records, want %d", len(recs), len(cases))
	}
	for _, r := range recs {
		if r.RequestID == "json" || r.RequestID == "empty-extra" {
			continue
		}
		if r.ErrorKind != "" || len(r.EventNs) != 2 {
			t.Errorf("record %s: %d events, error %q %q; want 2 and none", r.RequestID, len(r.EventNs), r.ErrorKind, r.ErrorMessage)
		}
	}
}
