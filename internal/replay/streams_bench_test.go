package replay

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/trace"
)

// The stream benchmarks run the mock in a child process (the test binary
// re-executed with benchMockEnv set) so that client and server each have
// their own file-descriptor limit: 10,000 streams need 10,000 sockets on
// each side (TestMain).
const benchMockEnv = "TRACEKIT_REPLAY_BENCH_MOCK"

// serveBenchMock runs a mock until stdin closes; spec is
// "decodeNs,maxSeqs,logPath". It prints the URL on stdout.
func serveBenchMock(spec string) {
	var decode, seqs int64
	var logPath string
	fmt.Sscanf(spec, "%d,%d,%s", &decode, &seqs, &logPath)
	cfg := mock.DefaultConfig()
	cfg.Latency.PrefillBase = mock.Duration(5 * time.Millisecond)
	cfg.Latency.PrefillPerToken, cfg.Latency.DecodePerSeq, cfg.Latency.JitterCV = 0, 0, 0
	cfg.Latency.DecodeBase = mock.Duration(decode)
	cfg.Latency.MaxNumSeqs = int(seqs)
	cfg.LogPath = logPath
	srv, err := mock.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	srv.Close()
}

// BenchmarkStreams replays `streams` one-turn conversations that all stream
// at once (4 events/s each, so 10,000 streams make 40,000 events/s) from a
// mock in a child process, and reports the error of every event stamp
// against the mock's ground-truth write time, the event rate, and the
// client's peak RSS.
//
//	go test -run ^$ -bench Streams -benchtime 1x ./internal/replay/
func BenchmarkStreams(b *testing.B) {
	for _, streams := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			for range b.N {
				benchStreams(b, streams)
			}
		})
	}
}

func benchStreams(b *testing.B, streams int) {
	const tokens = 12
	decode := 250 * time.Millisecond
	dir := b.TempDir()
	logPath := filepath.Join(dir, "mock.parquet")
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d,%s", benchMockEnv, decode, streams+10, logPath))
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal("mock child: ", err)
	}
	var convs [][]trace.Turn
	for i := range streams {
		convs = append(convs, conv("s"+strconv.Itoa(i), 1, time.Duration(i)*time.Second/time.Duration(streams), 0, tokens))
	}
	sink := &memSink{}
	r, err := New(Config{Trace: writeTrace(b, convs...), Targets: []string{url[:len(url)-1]}, IgnoreEOS: true, Model: "m", ContinuousUsage: "on"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ResetTimer()
	res, err := r.Run(ctx, sink)
	b.StopTimer()
	r.Close()
	stdin.Close()
	child.Wait()
	if err != nil {
		b.Fatal(err)
	}
	logs, _, err := mock.ReadLog(logPath)
	if err != nil {
		b.Fatal(err)
	}
	server := make(map[string][]int64, len(logs))
	for _, e := range logs {
		server[e.RequestID] = e.EventMonoNs
	}
	var errs []int64
	var first, last int64 = 1 << 62, 0
	for _, rec := range sink.Records() {
		ev := server[rec.RequestID]
		if len(ev) != len(rec.EventNs) {
			continue
		}
		for i, ns := range rec.EventNs {
			errs = append(errs, res.Meta.StartMonoNs+ns-ev[i])
			first, last = min(first, ns), max(last, ns)
		}
	}
	if len(errs) == 0 {
		b.Fatalf("no event matched the mock's log (%d records, %d errors)", len(sink.Records()), res.Errors)
	}
	slices.Sort(errs)
	b.ReportMetric(float64(errs[len(errs)/2])/1e3, "stamp-err-p50-us")
	b.ReportMetric(float64(errs[len(errs)*99/100])/1e3, "stamp-err-p99-us")
	b.ReportMetric(float64(errs[len(errs)-1])/1e3, "stamp-err-max-us")
	b.ReportMetric(float64(len(errs))/(float64(last-first)/1e9), "events/s")
	b.ReportMetric(float64(res.Errors), "errors")
	b.ReportMetric(float64(maxRSS())/(1<<20), "peak-rss-MiB")
	h := res.Meta.Health
	b.ReportMetric(float64(h.DispatchLagP99Ns)/1e3, "dispatch-p99-us")
	b.ReportMetric(h.CPUSeconds/h.WallSeconds, "cores")
}
