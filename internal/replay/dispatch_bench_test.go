package replay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/clock"
)

// BenchmarkDispatchLag schedules b.N wake-ups at a fixed rate, each waited
// for by its own goroutine (as conversations wait in a run), and reports the
// lag percentiles and the CPU the process used per wall second (cores).
//
// At 20 req/s (rare arrivals, as a production trace replayed at its own
// pace has: a machine that sleeps between them wakes late) it runs at most
// lowRateWakes wake-ups, the default and the baseline only.
//
//	go test -run ^$ -bench DispatchLag -benchtime 5000x ./internal/replay/
func BenchmarkDispatchLag(b *testing.B) {
	for _, rate := range []int{20, 500, 2000, 5000} {
		for _, impl := range []struct {
			name string
			make func() (Dispatcher, func())
		}{
			{"sleep", func() (Dispatcher, func()) { return SleepDispatcher{}, func() {} }},
			{"precise", preciseFactory(b, DefaultSpin)}, // the default
			{"precise-nospin", preciseFactory(b, 0)},
			{"precise-spin20us", preciseFactory(b, 20*time.Microsecond)},
		} {
			if rate < 500 && impl.name != "precise" && impl.name != "sleep" {
				continue
			}
			b.Run(fmt.Sprintf("rate=%d/%s", rate, impl.name), func(b *testing.B) {
				d, stop := impl.make()
				defer stop()
				benchLag(b, d, rate)
			})
		}
	}
}

func preciseFactory(b *testing.B, spin time.Duration) func() (Dispatcher, func()) {
	return func() (Dispatcher, func()) {
		p, err := clock.NewPrecise(spin)
		if err != nil {
			b.Fatal(err)
		}
		return p, func() { p.Close() }
	}
}

// lowRateWakes bounds the wake-ups below 500 req/s (20 s at 20/s).
const lowRateWakes = 400

func benchLag(b *testing.B, d Dispatcher, rate int) {
	n := b.N
	if rate < 500 {
		n = min(n, lowRateWakes)
	}
	lags := make([]int64, n)
	interval := int64(time.Second) / int64(rate)
	var wg sync.WaitGroup
	start := clock.Mono() + int64(20*time.Millisecond)
	cpu0 := cpuNs()
	b.ResetTimer()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lag, err := d.WaitUntil(context.Background(), start+int64(i)*interval)
			if err != nil {
				b.Error(err)
			}
			lags[i] = lag
		}()
	}
	wg.Wait()
	b.StopTimer()
	wall := clock.Mono() - start
	slices.Sort(lags)
	b.ReportMetric(float64(lags[n/2])/1e3, "p50-us")
	b.ReportMetric(float64(lags[n*99/100])/1e3, "p99-us")
	b.ReportMetric(float64(lags[n-1])/1e3, "max-us")
	b.ReportMetric(float64(cpuNs()-cpu0)/float64(wall), "cores")
}

// cpuNs is the user+system CPU time of the process.
func cpuNs() int64 {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
