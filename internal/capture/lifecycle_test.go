package capture

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/capture/h1proxy"
	"github.com/tracekit/tracekit/trace"
)

// TestProxyCloseLeavesNoGoroutines: streams in flight (recorded LLM calls
// and a plain pass-through stream, and one whose upstream has sent nothing
// yet, its head still to come) are cut by Shutdown, and once it
// returns every goroutine the proxy started is gone: the goroutine count
// returns to what it was before the proxy started. The upstream streams
// until its request is canceled; one complete request leaves an idle
// upstream connection behind.
func TestProxyCloseLeavesNoGoroutines(t *testing.T) { eachStack(t, testProxyCloseLeavesNoGoroutines) }

func testProxyCloseLeavesNoGoroutines(t *testing.T, stack h1proxy.Stack) {
	silent := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.RawQuery, "silent") {
			io.Copy(io.Discard, r.Body) // then net/http sees the connection end
			silent <- struct{}{}
			select { // a long prefill, until the proxy gives up the request
			case <-r.Context().Done():
			case <-time.After(30 * time.Second): // hang guard: the test then fails on its records
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.Contains(r.URL.RawQuery, "quick") {
			io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"done\"}}]}\n\ndata: [DONE]\n\n")
			return
		}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	}))
	defer up.Close()
	baseline := runtime.NumGoroutine()

	ps, _ := startProxy(t, stack, up.URL, nil)
	client := &http.Client{Transport: &http.Transport{}}
	body := chatBody([]msg{{"user", "stream forever"}}, true)

	const streams = 4
	var wg sync.WaitGroup
	started := make(chan error, streams+1)
	open := func(method, path, body string) {
		defer wg.Done()
		req, _ := http.NewRequest(method, ps.URL()+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			started <- err
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			started <- fmt.Errorf("first event: %w", err)
			return
		}
		started <- nil
		io.Copy(io.Discard, br) // until the proxy cuts the stream
	}
	for range streams {
		wg.Add(1)
		go open("POST", "/v1/chat/completions", body)
	}
	wg.Add(1)
	go open("GET", "/events", "") // not an LLM call: forwarded only
	for range streams + 1 {
		if err := <-started; err != nil {
			t.Fatal(err)
		}
	}
	// While the streams hold their upstream connections, a complete
	// request opens one more, left idle in the proxy's pool.
	resp, err := client.Post(ps.URL()+"/v1/chat/completions?quick", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	silentDone := make(chan error, 1)
	go func() {
		resp, err := client.Post(ps.URL()+"/v1/chat/completions?silent", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("a response (status %d) where the upstream sent none", resp.StatusCode)
		} else {
			err = nil
		}
		silentDone <- err
	}()
	select {
	case <-silent: // the proxy sent it upstream
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("the silent request did not reach the upstream")
	}
	if err := ps.Shutdown(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-silentDone; err != nil {
		t.Error(err)
	}
	client.CloseIdleConnections()

	deadline := time.Now().Add(15 * time.Second) // hang guard, not a budget
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines after Close, %d before the proxy started:\n%s", n, baseline, buf)
	}

	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	kinds := map[trace.ErrorKind]int{}
	for _, r := range recs {
		kinds[r.ErrorKind]++
	}
	if len(recs) != streams+2 || kinds[""] != 1 || kinds[trace.ErrCanceled] != streams+1 {
		t.Fatalf("records by error kind %v; want 1 complete and %d canceled", kinds, streams+1)
	}
}

// TestProxySmallQueue: with room for one record in flight, concurrent
// clients wait for each other's accounting instead of queueing without
// bound, and every request is still recorded once.
func TestProxySmallQueue(t *testing.T) { eachStack(t, testProxySmallQueue) }

func testProxySmallQueue(t *testing.T, stack h1proxy.Stack) {
	up := fastMock(t)
	ps, _ := startProxy(t, stack, up.URL(), func(c *ProxyConfig) { c.Queue = 1 })
	const clients, each = 6, 3
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := range each {
				id := fmt.Sprintf("q-%d-%d", c, k)
				req, _ := http.NewRequest("POST", ps.URL()+"/v1/chat/completions", strings.NewReader(chatBody([]msg{{"user", id}}, true)))
				req.Header.Set("X-Request-Id", id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s: status %d", id, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readRecordsT(t, ps.Proxy().Segments()[0].Recording)
	seen := map[string]int{}
	for _, r := range recs {
		if r.ErrorKind != "" {
			t.Fatalf("record %+v", r)
		}
		seen[r.RequestID]++
	}
	if len(recs) != clients*each || len(seen) != clients*each {
		t.Fatalf("%d records, %d distinct; want %d", len(recs), len(seen), clients*each)
	}
}

// TestGCPercent: the proxy runs with its GC target from NewProxy to Close
// and puts the process's back after; a negative one leaves it alone.
func TestGCPercent(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the proxy leaves it alone")
	}
	up := fastMock(t)
	old := debug.SetGCPercent(150)
	defer debug.SetGCPercent(old)
	for _, c := range []struct{ set, while int }{{0, DefaultGCPercent}, {250, 250}, {-1, 150}} {
		p, err := NewProxy(ProxyConfig{Upstream: up.URL(), OutDir: t.TempDir(), Tokenizer: testTok, GCPercent: c.set})
		if err != nil {
			t.Fatal(err)
		}
		if got := debug.SetGCPercent(-1); got != c.while {
			t.Errorf("GCPercent %d: GOGC %d while the proxy runs, want %d", c.set, got, c.while)
		} else {
			debug.SetGCPercent(got)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetGCPercent(150); got != 150 {
			t.Errorf("GCPercent %d: GOGC %d after Close, want 150 back", c.set, got)
		}
	}
}
