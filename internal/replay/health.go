package replay

import (
	"math"
	"runtime/metrics"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/procs"
	"github.com/tracekit/tracekit/trace"
)

// monitor measures the client's own health over a run.
type monitor struct {
	lag       clock.Lateness
	startCPU  int64
	startWall time.Time
	startSch  *metrics.Float64Histogram
	// obsCPU is the arrival observer's CPU time so far (ns): a process of
	// the client's own, whose CPU the client's is not complete without.
	obsCPU   func() int64
	startObs int64
}

const schedMetric = "/sched/latencies:seconds"

func startMonitor(obsCPU func() int64) *monitor {
	return &monitor{startCPU: cpuTime(), startWall: time.Now(), startSch: schedHist(), obsCPU: obsCPU, startObs: obsCPU()}
}

// finish returns the health of the run so far, with warnings when the
// figures say the client may have delayed requests.
func (m *monitor) finish() *trace.Health {
	h := m.sample(true)
	h.Warnings = h.Assess()
	return h
}

// sample returns the health of the run so far; with obs, the arrival
// observer's CPU too (only while the run's connections are open).
func (m *monitor) sample(obs bool) *trace.Health {
	h := &trace.Health{
		DispatchLagP50Ns: m.lag.Quantile(0.5),
		DispatchLagP99Ns: m.lag.Quantile(0.99),
		DispatchLagMaxNs: m.lag.Max(),
		SchedLatP99Ns:    schedP99(m.startSch, schedHist()),
		CPUSeconds:       float64(cpuTime()-m.startCPU) / 1e9,
		WallSeconds:      time.Since(m.startWall).Seconds(),
		MaxRSSBytes:      maxRSS(),
		Cores:            procs.Base(), // without the Ps a run adds for goroutines that hold theirs
	}
	if obs {
		h.ObserverCPUSeconds = float64(m.obsCPU()-m.startObs) / 1e9
		h.CPUSeconds += h.ObserverCPUSeconds
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
