package h1proxy

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// plainHeads are heads the loop parses itself: what vLLM (uvicorn),
// SGLang, TGI and tracekit's mock send, and error answers.
var plainHeads = []string{
	"HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 10:00:00 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Request-Id: abc\r\nTransfer-Encoding: chunked\r\n\r\ndata: {}\n\n",
	"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-compute-type: gpu+optimized\r\nconnection: keep-alive\r\ntransfer-encoding: Chunked\r\naccess-control-allow-origin: *\r\nvary: origin, access-control-request-method\r\n\r\n",
	"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 52\r\nConnection: close\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 503 Service Unavailable\r\nContent-Length:   7  \r\nRetry-After: 1\r\nX-Multi: a\r\nx-multi: b\r\nKeep-Alive: timeout=5\r\nContent-Encoding: identity\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-Odd_Name.1: \tv\xc3\xa9 \t\r\nTransfer-Encoding: chunked\r\nConnection: close, keep-alive\r\n\r\n",
}

// otherHeads are handed back to net/http.
var otherHeads = []string{
	"HTTP/1.1 100 Continue\r\n\r\n",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: 1\r\n continued\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: X-Secret\r\nX-Secret: 1\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-Big: " + strings.Repeat("x", maxLoopHead) + "\r\n\r\n",
}

func TestParsePlainHead(t *testing.T) {
	for _, s := range plainHeads {
		if _, _, _, st := parsePlainHead([]byte(s), nil); st != headPlain {
			t.Errorf("%q: status %d, want plain", s, st)
		}
		checkAgainstNetHTTP(t, []byte(s))
	}
	for _, s := range otherHeads {
		if _, _, _, st := parsePlainHead([]byte(s), nil); st != headOther {
			t.Errorf("%q: status %d, want other", s, st)
		}
	}
	// A head cut anywhere asks for more (or is too long to wait for).
	s := plainHeads[0]
	for i := range len(s) - 1 {
		if _, _, _, st := parsePlainHead([]byte(s[:i]), nil); st != headMore {
			t.Fatalf("%q: status %d, want more", s[:i], st)
		}
	}
	if _, _, _, st := parsePlainHead(bytes.Repeat([]byte("x"), maxLoopHead), nil); st != headOther {
		t.Errorf("%d bytes without an end: status %d, want other", maxLoopHead, st)
	}
	// What the client gets: the status line, canonical keys, trimmed values,
	// no hop-by-hop or framing headers (the writer adds its own framing).
	_, out, n, _ := parsePlainHead([]byte(plainHeads[5]+"body"), []byte("x"))
	want := "xHTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nX-Multi: a\r\nX-Multi: b\r\nContent-Encoding: identity\r\n"
	if string(out) != want || n != len(plainHeads[5]) {
		t.Errorf("out %q (n %d), want %q (n %d)", out, n, want, len(plainHeads[5]))
	}
}

// FuzzParsePlainHead checks that whatever the loop's parser accepts,
// net/http reads the same way.
func FuzzParsePlainHead(f *testing.F) {
	for _, s := range append(plainHeads, otherHeads...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAgainstNetHTTP(t, b)
	})
}

// checkAgainstNetHTTP fails when parsePlainHead accepts b and net/http
// reads it otherwise.
func checkAgainstNetHTTP(t *testing.T, b []byte) {
	t.Helper()
	h, out, n, st := parsePlainHead(b, nil)
	if st != headPlain {
		return
	}
	req, _ := http.NewRequest("POST", "http://upstream/v1/chat/completions", nil)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b[:n])), req)
	if err != nil {
		t.Fatalf("%q: plain to the loop, net/http: %v", b[:n], err)
	}
	chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
	length := resp.ContentLength
	if chunked {
		length = -1
	}
	enc := resp.Header.Get("Content-Encoding")
	got := []any{h.status, h.chunked, h.length, h.close, h.sse}
	want := []any{resp.StatusCode, chunked, length, resp.Close, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	if !reflect.DeepEqual(got, want) || enc != "" && !strings.EqualFold(enc, "identity") {
		t.Fatalf("%q: loop read %v, net/http %v (encoding %q)", b[:n], got, want, enc)
	}
	// The forwarded headers: those writeHead would forward from net/http's.
	line, rest, _ := bytes.Cut(out, []byte("\r\n"))
	if string(line)+"\r\n" != string(appendStatusLine(nil, resp.StatusCode)) {
		t.Fatalf("%q: status line %q", b[:n], line)
	}
	fwd := http.Header{}
	for k, vs := range resp.Header {
		if k != "Content-Length" && forwarded(k, resp.Header["Connection"]) {
			fwd[k] = vs
		}
	}
	mine := http.Header{}
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, _ := strings.Cut(string(line), ": ")
		mine[k] = append(mine[k], v)
	}
	if !reflect.DeepEqual(mine, fwd) {
		t.Fatalf("%q: loop forwards %q, net/http's headers %q", b[:n], mine, fwd)
	}
}
