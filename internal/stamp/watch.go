package stamp

import (
	"fmt"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// The arrival observer runs at a raised priority, so the CPU it takes is
// taken from the reader first. That is cheap while the client has CPU to
// spare and ruinous when it has none: the reads fall behind, the queues
// the observer peeks at grow, and its cost grows with them. The watch
// samples the observer's CPU every watchEvery and switches it off for the
// rest of the run (connections read on with kernel stamps, and the run's
// stamp metadata says when and why) once it has taken more than
// maxObserverShare of the CPUs the client may run on for watchStrikes
// samples in a row.
var (
	watchEvery       = time.Second
	watchStrikes     = 2
	maxObserverShare = 0.25
)

// startWatch starts the watch over s.obs; stopWatch ends it.
func (s *Source) startWatch() {
	s.startNs = clock.Mono()
	s.watchStop, s.watchDone = make(chan struct{}), make(chan struct{})
	go s.watch(s.obs, clientCPUs())
}

func (s *Source) stopWatch() {
	if s.watchStop == nil {
		return
	}
	close(s.watchStop)
	<-s.watchDone
	s.watchStop = nil
}

// watch is the watch's goroutine, owned by s: it ends on stopWatch or
// when it switched the observer off.
func (s *Source) watch(o *observer, cpus int) {
	defer close(s.watchDone)
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	lastCPU, lastAt, strikes := o.cpuNs(), time.Now(), 0
	for {
		select {
		case <-s.watchStop:
			return
		case now := <-t.C:
			cpu := o.cpuNs()
			share := observerShare(cpu-lastCPU, now.Sub(lastAt), cpus)
			lastCPU, lastAt = cpu, now
			if share <= maxObserverShare {
				strikes = 0
				continue
			}
			if strikes++; strikes < watchStrikes {
				continue
			}
			why := fmt.Sprintf("it used %.0f%% of the %d CPUs the client may run on, more than %.0f%%, %d seconds running",
				100*share, cpus, 100*maxObserverShare, watchStrikes)
			s.offWhy.Store(&why)
			s.offNs.Store(clock.Mono())
			o.stop()
			return
		}
	}
}

// observerShare is the observer's CPU time cpuNs over wall time on cpus
// CPUs, as a fraction of all of them.
func observerShare(cpuNs int64, wall time.Duration, cpus int) float64 {
	if wall <= 0 || cpus < 1 {
		return 0
	}
	return float64(cpuNs) / (float64(wall) * float64(cpus))
}
