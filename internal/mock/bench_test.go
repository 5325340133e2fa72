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
	"syscall"
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

// The same loads with each stream on its own goroutine and timer, the
// design the scheduler replaced, for comparison.
func BenchmarkStreams1000Goroutines(b *testing.B)  { benchGoroutines(b, 1000) }
func BenchmarkStreams10000Goroutines(b *testing.B) { benchGoroutines(b, 10000) }

func benchGoroutines(b *testing.B, n int) {
	goroutineStreams = true
	defer func() { goroutineStreams = false }()
	benchStreams(b, n)
}

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
		cpu0 := processCPU()
		ctx, cancel := context.WithTimeout(context.Background(), 2*benchSteady+40*time.Second)
		client := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBenchClientHelper$", "-test.count=1")
		client.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d", benchClientEnv, addr, n, maxTokens, itl))
		client.Stdout, client.Stderr = os.Stderr, os.Stderr
		err = client.Run()
		cancel()
		cpu := processCPU() - cpu0
		log := srv.Log()
		srv.Close()
		if err != nil {
			b.Fatalf("client: %v", err)
		}
		events := reportSteady(b, log, n)
		b.ReportMetric(float64(cpu.Microseconds())/float64(events), "server-cpu-us/event")
	}
}

// processCPU is the user and system CPU time this process has used; the
// client is a child process, so it is the server's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// slice is the length of the windows lateness-p99-slice-median is over.
const slice = 250 * time.Millisecond

// reportSteady reports events/s and lateness over the window in which every
// stream had started and none had ended, and returns the events the log
// holds. The machine is shared, so next to the p99 over the window it
// reports the median over 250 ms slices of each slice's p99: a compile
// elsewhere spoils a few slices, not the median.
func reportSteady(b *testing.B, log []LogEntry, n int) int {
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
	var events, all int
	var late []int64
	bySlice := make([][]int64, (to-from)/int64(slice)+1)
	for _, e := range log {
		all += len(e.EventMonoNs)
		for i, t := range e.EventMonoNs {
			if t >= from && t <= to {
				events++
				late = append(late, e.EventLatenessNs[i])
				k := (t - from) / int64(slice)
				bySlice[k] = append(bySlice[k], e.EventLatenessNs[i])
			}
		}
	}
	q := func(l []int64, p float64) float64 {
		slices.Sort(l)
		return float64(l[int(p*float64(len(l)-1))]) / 1e6
	}
	var sliceP99 []int64
	for _, l := range bySlice[:len(bySlice)-1] { // the last slice is partial
		if len(l) > 0 {
			sliceP99 = append(sliceP99, int64(q(l, 0.99)*1e6))
		}
	}
	window := time.Duration(to - from)
	b.ReportMetric(float64(events)/window.Seconds(), "events/s")
	b.ReportMetric(q(late, 0.5), "lateness-p50-ms")
	b.ReportMetric(q(late, 0.99), "lateness-p99-ms")
	if len(sliceP99) > 0 {
		b.ReportMetric(q(sliceP99, 0.5), "lateness-p99-slice-median-ms")
	}
	b.ReportMetric(window.Seconds(), "window-s")
	b.ReportMetric(0, "ns/op")
	return all
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
