package capture

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
)

// TestProxyStaleKeepAliveRetry: an upstream that reads the second request
// on a kept-alive connection and then closes it without answering (its
// idle timeout raced the request), by FIN or by RST. The proxy's check of
// the idle connection passed (it was open when taken), so only the retry
// on a new connection saves the request: every client gets its answer,
// each stale connection costs exactly one more dial, and no record holds
// an error.
func TestProxyStaleKeepAliveRetry(t *testing.T) {
	for _, how := range []string{"fin", "rst"} {
		t.Run(how, func(t *testing.T) {
			var mu sync.Mutex
			served := map[net.Conn]int{}
			up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
				readBody(r)
				mu.Lock()
				served[c]++
				n := served[c]
				mu.Unlock()
				if n == 2 {
					if how == "rst" {
						c.(*net.TCPConn).SetLinger(0)
					}
					return false // read, never answered
				}
				io.WriteString(c, sseHead+chunk(sseEvent("s")+"data: [DONE]\n\n")+"0\r\n\r\n")
				return true
			})
			// The native stack only: its client sends a request again on a
			// new connection; net/http's Transport does not resend a POST
			// (not idempotent) and answers 502.
			ps, _ := startProxy(t, h1proxy.Native, up.URL(), nil)
			c := dialProxy(t, ps, 20*time.Second)
			br := bufio.NewReader(c)
			const n = 4
			for i := range n {
				resp, b, err := rawRequest(t, c, br, chatRequest(fmt.Sprintf("st-%d", i), chatBody([]msg{{"user", "s"}}, true)))
				if err != nil || resp.StatusCode != 200 || string(b) != sseEvent("s")+"data: [DONE]\n\n" {
					t.Fatalf("request %d: %v %q", i, err, b)
				}
			}
			// Connections: the first serves request 0 and dies on 1, whose
			// retry's connection serves 1 and dies on 2, and so on.
			if got := up.accepts.Load(); got != n {
				t.Fatalf("%d upstream connections for %d requests, want %d", got, n, n)
			}
			closeWantClean(t, ps, n, 1)
		})
	}
}

// TestProxyLargeRequestToSlowUpstream: a 16 MB request body to an upstream
// that waits before reading it, so that the proxy's write finds the
// socket's send buffer full and must wait for it to drain; the upstream
// gets every byte, in order, and the answer comes back.
func TestProxyLargeRequestToSlowUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("long end-to-end run: make test runs it")
	}
	eachStack(t, testProxyLargeRequestToSlowUpstream)
}

func testProxyLargeRequestToSlowUpstream(t *testing.T, stack h1proxy.Stack) {
	content := strings.Repeat("0123456789abcdef", 1<<20)
	body := chatBody([]msg{{"user", content}}, true)
	got := make(chan []byte, 1)
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		time.Sleep(200 * time.Millisecond)
		got <- readBody(r)
		io.WriteString(c, sseHead+chunk(sseEvent("big")+"data: [DONE]\n\n")+"0\r\n\r\n")
		return true
	})
	ps, _ := startProxy(t, stack, up.URL(), func(c *ProxyConfig) { c.Tokenizer = byteTok{} })
	c := dialProxy(t, ps, 60*time.Second)
	resp, b, err := rawRequest(t, c, bufio.NewReader(c), chatRequest("big", body))
	if err != nil || resp.StatusCode != 200 || string(b) != sseEvent("big")+"data: [DONE]\n\n" {
		t.Fatalf("%v %q", err, b)
	}
	if g := <-got; !bytes.Equal(g, []byte(body)) {
		t.Fatalf("the upstream got %d bytes, want the %d sent", len(g), len(body))
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	if len(recs) != 1 || recs[0].ErrorKind != "" || len(recs[0].EventNs) != 1 {
		t.Fatalf("records %+v", recs)
	}
}

// TestProxyOutputTokensCountedOnce: an upstream that reports no usage.
// The answer's tokens are counted once, event by event, for the record;
// the trace's output length is their sum, and the whole answer is never
// counted again.
func TestProxyOutputTokensCountedOnce(t *testing.T) { eachStack(t, testProxyOutputTokensCountedOnce) }

func testProxyOutputTokensCountedOnce(t *testing.T, stack h1proxy.Stack) {
	up := startHostile(t, func(c net.Conn, br *bufio.Reader, r *http.Request) bool {
		readBody(r)
		io.WriteString(c, sseHead+chunk(sseEvent("abcde")+sseEvent("fghij")+sseEvent("klmno")+"data: [DONE]\n\n")+"0\r\n\r\n")
		return true
	})
	tok := &countingTok{}
	ps, _ := startProxy(t, stack, up.URL(), func(c *ProxyConfig) { c.Tokenizer = tok })
	c := dialProxy(t, ps, 20*time.Second)
	if resp, _, err := rawRequest(t, c, bufio.NewReader(c), chatRequest("once", chatBody([]msg{{"user", "u"}}, true))); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v", err)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	seg := ps.Proxy().Segments()[0]
	recs, _ := readRecordsT(t, seg.Recording)
	rows := readTrace(t, seg.Trace)
	if len(recs) != 1 || len(rows) != 1 {
		t.Fatalf("%d records, %d trace rows", len(recs), len(rows))
	}
	var sum int32
	for _, n := range recs[0].EventTokens {
		sum += n
	}
	// byteTok's count: 2 tokens for each 5-byte event; the answer whole
	// would be 4.
	if sum != 6 || rows[0].OutputTokens != sum || recs[0].CompletionTokens > 0 {
		t.Fatalf("events counted %v (sum %d), trace output %d, server's %d", recs[0].EventTokens, sum, rows[0].OutputTokens, recs[0].CompletionTokens)
	}
	if n := tok.counted("abcdefghijklmno"); n != 0 {
		t.Fatalf("the whole answer was counted %d times, want 0 (its events were counted)", n)
	}
}

// countingTok is byteTok that remembers how often each text was counted.
type countingTok struct {
	byteTok
	mu   sync.Mutex
	seen map[string]int
}

func (c *countingTok) Count(text string) int {
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	c.seen[text]++
	c.mu.Unlock()
	return c.byteTok.Count(text)
}

func (c *countingTok) counted(text string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[text]
}
