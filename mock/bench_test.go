package mock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The streams benchmark drives the mock with a client in a child process
// (this test binary re-run as TestBenchClientHelper), so the two sides do
// not share a file-descriptor limit and the server's numbers are its own.
const (
	benchClientEnv = "TRACEKIT_MOCK_BENCH_CLIENT" // "addr streams maxTokens itlNs"
	benchRate      = 100_000                      // target events/s across all streams
	benchSteady    = 5 * time.Second              // each stream lasts about this long
)

func BenchmarkStreams1000(b *testing.B)  { benchStreams(b, 1000) }
func BenchmarkStreams10000(b *testing.B) { benchStreams(b, 10000) }

// benchStreams runs n concurrent streams whose ITL is set so that together
// they should emit benchRate events/s, and reports the sustained rate and
// the server's own lateness over the window when all streams are running.
func benchStreams(b *testing.B, n int) {
	itl := time.Duration(n) * time.Second / benchRate
	maxTokens := int(benchSteady / itl)
	cfg := DefaultConfig()
	cfg.KeepLog = true
	cfg.Latency = Latency{PrefillBase: 0, DecodeBase: Duration(itl), TokensPerEvent: 1, MaxNumSeqs: n, OutputMean: 1, MaxModelLen: 1 << 20}
	for range b.N {
		srv, err := Start(cfg)
		if err != nil {
			b.Fatal(err)
		}
		addr := srv.URL()[len("http://"):]
		ctx, cancel := context.WithTimeout(context.Background(), 2*benchSteady+40*time.Second)
		client := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBenchClientHelper$", "-test.count=1")
		client.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d", benchClientEnv, addr, n, maxTokens, itl))
		client.Stdout, client.Stderr = os.Stderr, os.Stderr
		err = client.Run()
		cancel()
		log := srv.Log()
		srv.Close()
		if err != nil {
			b.Fatalf("client: %v", err)
		}
		reportSteady(b, log, n)
	}
}

// reportSteady reports events/s and lateness over the window in which every
// stream had started and none had ended.
func reportSteady(b *testing.B, log []LogEntry, n int) {
	var from, to int64 = 0, 1 << 62
	ok := 0
	for _, e := range log {
		if len(e.EventMonoNs) == 0 {
			continue
		}
		ok++
		from = max(from, e.EventMonoNs[0])
		to = min(to, e.EventMonoNs[len(e.EventMonoNs)-1])
	}
	if ok < n || to <= from {
		b.Fatalf("%d of %d streams completed, steady window [%d, %d] empty", ok, n, from, to)
	}
	var events int
	var late []int64
	for _, e := range log {
		for i, t := range e.EventMonoNs {
			if t >= from && t <= to {
				events++
				late = append(late, e.EventLatenessNs[i])
			}
		}
	}
	slices.Sort(late)
	q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e6 }
	window := time.Duration(to - from)
	b.ReportMetric(float64(events)/window.Seconds(), "events/s")
	b.ReportMetric(q(0.5), "lateness-p50-ms")
	b.ReportMetric(q(0.99), "lateness-p99-ms")
	b.ReportMetric(window.Seconds(), "window-s")
	b.ReportMetric(0, "ns/op")
}

// TestBenchClientHelper is the benchmark's client when run as a child
// process; otherwise it skips.
func TestBenchClientHelper(t *testing.T) {
	spec := os.Getenv(benchClientEnv)
	if spec == "" {
		t.Skip("only run as the streams benchmark's client process")
	}
	var addr string
	var n, maxTokens int
	var itl time.Duration
	if _, err := fmt.Sscanf(spec, "%s %d %d %d", &addr, &n, &maxTokens, &itl); err != nil {
		t.Fatalf("%s=%q: %v", benchClientEnv, spec, err)
	}
	body := `{"messages":[{"role":"user","content":"bench"}],"stream":true,"ignore_eos":true,"max_tokens":` + strconv.Itoa(maxTokens) + `}`
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	deadline := time.Now().Add(2*benchSteady + 30*time.Second)
	dials := make(chan struct{}, 256) // bounds concurrent connects (listen backlog)
	// Connect everything first, then send all requests at once, so that
	// the steady window (all streams running) is most of the run.
	var wg, connected sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	connected.Add(n)
	for i := range n {
		wg.Go(func() {
			dials <- struct{}{}
			conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
			<-dials
			connected.Done()
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			conn.SetDeadline(deadline)
			<-start
			// Spread the starts over one ITL so streams do not tick in
			// lockstep (real traffic does not).
			time.Sleep(itl * time.Duration(i) / time.Duration(n))
			if _, err := io.WriteString(conn, req); err != nil {
				errs <- err
				return
			}
			if _, err := io.Copy(io.Discard, bufio.NewReaderSize(conn, 4096)); err != nil {
				errs <- err
			}
		})
	}
	connected.Wait()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("stream: %v", err)
	}
}
