package h1proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// testTap watches the POSTs and writes down every call it gets.
type testTap struct {
	mu  sync.Mutex
	xs  []*testExchange
	bad []string // calls out of order
}

func (tt *testTap) Open(r *http.Request, arrival int64) Exchange {
	if r.Method != http.MethodPost {
		return nil
	}
	x := &testExchange{tap: tt, id: r.Header.Get("X-Id"), arrival: arrival, calls: []string{"open"}}
	tt.mu.Lock()
	tt.xs = append(tt.xs, x)
	tt.mu.Unlock()
	return x
}

// exchange returns the exchange watched for the request with X-Id id.
func (tt *testTap) exchange(t *testing.T, id string) *testExchange {
	t.Helper()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for _, x := range tt.xs {
		if x.id == id {
			return x
		}
	}
	t.Fatalf("no exchange %s watched", id)
	return nil
}

type testExchange struct {
	tap     *testTap
	id      string
	arrival int64
	calls   []string
	body    []byte
	resp    Response
	read    bytes.Buffer
	stamps  []int64
	out     Outcome
}

func (x *testExchange) Body(b []byte) { x.calls = append(x.calls, "body"); x.body = b }

func (x *testExchange) Response(h Response) { x.calls = append(x.calls, "response"); x.resp = h }

func (x *testExchange) Read(p []byte, stamp int64) {
	if len(p) == 0 {
		x.calls = append(x.calls, "empty read")
	}
	if len(x.calls) == 0 || x.calls[len(x.calls)-1] != "read" {
		x.calls = append(x.calls, "read")
	}
	x.read.Write(p)
	x.stamps = append(x.stamps, stamp)
}

func (x *testExchange) End(o Outcome) {
	x.calls = append(x.calls, "end")
	x.out = o
}

func (x *testExchange) sequence() string { return strings.Join(x.calls, " ") }

// startTapped serves a proxy with a testTap on stack in front of upstream.
func startTapped(t *testing.T, stack Stack, upstream string, maxBody int64) (*Server, *testTap) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	tap := &testTap{}
	s, err := Listen(Config{Upstream: u, Stack: stack, Tap: tap, MaxBodyBytes: maxBody}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(time.Second) })
	return s, tap
}

func eachStack(t *testing.T, test func(t *testing.T, stack Stack)) {
	for _, s := range []struct {
		name  string
		stack Stack
	}{{"native", Native}, {"nethttp", NetHTTP}} {
		t.Run(s.name, func(t *testing.T) { test(t, s.stack) })
	}
}

// TestTapSeesWhatIsForwarded: for a streamed response, the tap is told
// the request's body, the head, every byte of the body the client got (in
// reads it is told after the client's write, stamped in order), and a
// complete end, in that order and once each; an unwatched request passes
// untold.
func TestTapSeesWhatIsForwarded(t *testing.T) { eachStack(t, tapSeesWhatIsForwarded) }

func tapSeesWhatIsForwarded(t *testing.T, stack Stack) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 5 {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}))
	defer up.Close()
	s, tap := startTapped(t, stack, up.URL, 0)
	req, _ := http.NewRequest("POST", s.URL()+"/v1/chat/completions", strings.NewReader(`{"question":1}`))
	req.Header.Set("X-Id", "stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := http.Get(s.URL() + "/models"); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	s.Shutdown(time.Second) // every End returned
	x := tap.exchange(t, "stream")
	if seq := x.sequence(); seq != "open body response read end" {
		t.Fatalf("calls %q", seq)
	}
	if len(tap.xs) != 1 {
		t.Fatalf("%d exchanges watched, want only the POST", len(tap.xs))
	}
	if string(x.body) != `{"question":1}` || x.read.String() != string(got) || !strings.Contains(string(got), "event 4") {
		t.Fatalf("body %q; reads %q; client got %q", x.body, x.read.String(), got)
	}
	o, h := x.out, x.resp
	if h.Status != 200 || !h.EventStream || h.Encoding != "" || o.Status != 200 || !o.Complete || o.SendErr != nil || o.ReadErr != nil || o.ClientGone {
		t.Fatalf("response %+v, outcome %+v", h, o)
	}
	last := h.Stamp
	for _, st := range x.stamps {
		if st < last {
			t.Fatalf("stamps %v after the head's %d: out of order", x.stamps, h.Stamp)
		}
		last = st
	}
	if !(x.arrival <= o.SentNs && o.SentNs <= h.Stamp && last <= o.DoneNs) {
		t.Fatalf("arrival %d, sent %d, head %d, last read %d, done %d: out of order", x.arrival, o.SentNs, h.Stamp, last, o.DoneNs)
	}
}

// TestTapSeesFailures: an upstream nobody listens on, a request body
// over the bound and an upstream that cuts its body each end the
// exchange with the outcome saying so, the client answered or cut as the
// upstream was.
func TestTapSeesFailures(t *testing.T) { eachStack(t, tapSeesFailures) }

func tapSeesFailures(t *testing.T, stack Stack) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an upstream that sends half its Content-Length and closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, r.Body)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"half\":")
			}()
		}
	}()
	s, tap := startTapped(t, stack, "http://"+ln.Addr().String(), 16)
	send := func(id, body string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest("POST", s.URL()+"/v1/completions", strings.NewReader(body))
		req.Header.Set("X-Id", id)
		// A connection of its own: the proxy closes the one it answered
		// 413 on, and a POST sent on it again would fail in the client
		// without reaching the proxy.
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	if resp, b, err := send("large", strings.Repeat("x", 17)); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("large body: %v %s", err, b)
	}
	if _, b, err := send("cut", "{}"); err == nil {
		t.Fatalf("cut body: the client got %q and no cut", b)
	}

	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	s2, tap2 := startTapped(t, stack, "http://"+dead.Addr().String(), 0)
	req, _ := http.NewRequest("POST", s2.URL()+"/v1/completions", strings.NewReader("{}"))
	req.Header.Set("X-Id", "refused")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("refused: status %d", resp.StatusCode)
	}
	s.Shutdown(time.Second)
	s2.Shutdown(time.Second)

	if x := tap.exchange(t, "large"); x.sequence() != "open end" || x.out.SendErr == nil || !strings.Contains(x.out.SendErr.Error(), "larger than 16 bytes") {
		t.Errorf("large: calls %q, outcome %+v", x.sequence(), x.out)
	}
	if x := tap.exchange(t, "cut"); x.sequence() != "open body response read end" || x.out.ReadErr == nil || x.out.Complete || x.out.Status != 200 || x.read.String() != `{"half":` {
		t.Errorf("cut: calls %q, read %q, outcome %+v", x.sequence(), x.read.String(), x.out)
	}
	if x := tap2.exchange(t, "refused"); x.sequence() != "open body end" || x.out.SendErr == nil || x.out.Status != 0 || x.out.ClientGone {
		t.Errorf("refused: calls %q, outcome %+v", x.sequence(), x.out)
	}
}
