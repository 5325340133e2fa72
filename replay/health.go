package replay

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/trace"
)

// lagHist is a lock-free log-linear histogram of non-negative nanosecond
// values: bucket (e, m) holds values in [2^e + m*2^(e-3), 2^e + (m+1)*2^(e-3)),
// i.e. 8 sub-buckets per power of two, a relative error under 12.5%.
// Record is one atomic add: safe and cheap from every goroutine.
type lagHist struct {
	b   [64 * 8]atomic.Int64
	n   atomic.Int64
	max atomic.Int64
}

func lagBucket(v int64) int {
	if v < 8 {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // 2^e <= v
	m := (v >> (e - 3)) & 7
	return e*8 + int(m)
}

// bucketUpper is the largest value bucket i holds.
func bucketUpper(i int) int64 {
	if i < 8 {
		return int64(i)
	}
	e, m := i/8, int64(i%8)
	return (int64(1) << e) + (m+1)<<(e-3) - 1
}

func (h *lagHist) Record(v int64) {
	v = max(v, 0)
	h.b[lagBucket(v)].Add(1)
	h.n.Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Quantile returns the upper bound of the bucket holding quantile q.
func (h *lagHist) Quantile(q float64) int64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i := range h.b {
		seen += h.b[i].Load()
		if seen >= rank {
			return min(bucketUpper(i), h.max.Load())
		}
	}
	return h.max.Load()
}

// monitor measures the client's own health over a run.
type monitor struct {
	lag       lagHist
	startCPU  int64
	startWall time.Time
	startSch  *metrics.Float64Histogram
}

const schedMetric = "/sched/latencies:seconds"

func startMonitor() *monitor {
	return &monitor{startCPU: cpuTime(), startWall: time.Now(), startSch: schedHist()}
}

// finish returns the health of the run so far, with warnings when the
// figures say the client may have delayed requests.
func (m *monitor) finish() *trace.Health {
	h := &trace.Health{
		DispatchLagP50Ns: m.lag.Quantile(0.5),
		DispatchLagP99Ns: m.lag.Quantile(0.99),
		DispatchLagMaxNs: m.lag.max.Load(),
		SchedLatP99Ns:    schedP99(m.startSch, schedHist()),
		CPUSeconds:       float64(cpuTime()-m.startCPU) / 1e9,
		WallSeconds:      time.Since(m.startWall).Seconds(),
		MaxRSSBytes:      maxRSS(),
	}
	const ms = int64(time.Millisecond)
	if h.DispatchLagP99Ns > ms {
		h.Warnings = append(h.Warnings, fmt.Sprintf("dispatch lag p99 %.2f ms: requests left later than scheduled", float64(h.DispatchLagP99Ns)/1e6))
	}
	if h.SchedLatP99Ns > ms {
		h.Warnings = append(h.Warnings, fmt.Sprintf("Go scheduler latency p99 %.2f ms: event timestamps may be late by up to that", float64(h.SchedLatP99Ns)/1e6))
	}
	if h.WallSeconds > 1 && h.CPUSeconds/h.WallSeconds > 0.8*float64(runtime.GOMAXPROCS(0)) {
		h.Warnings = append(h.Warnings, fmt.Sprintf("the client used %.1f of %d cores: it was CPU-bound and its timings are suspect", h.CPUSeconds/h.WallSeconds, runtime.GOMAXPROCS(0)))
	}
	return h
}

func schedHist() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedP99 is the p99 of the scheduler latencies observed between two
// cumulative snapshots, in ns (the upper bound of its bucket).
func schedP99(a, b *metrics.Float64Histogram) int64 {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0
	}
	var total uint64
	for i := range b.Counts {
		total += b.Counts[i] - a.Counts[i]
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(0.99 * float64(total)))
	var seen uint64
	for i := range b.Counts {
		seen += b.Counts[i] - a.Counts[i]
		if seen >= rank {
			up := b.Buckets[i+1]
			if math.IsInf(up, 1) {
				up = b.Buckets[i]
			}
			return int64(up * 1e9)
		}
	}
	return 0
}

// cpuTime is the user+system CPU time of the process in ns.
func cpuTime() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// maxRSS is the peak resident set size of the process in bytes.
func maxRSS() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024 // Linux reports KiB
}
