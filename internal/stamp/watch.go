package stamp

import (
	"fmt"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// The arrival observer is one thread blocked in epoll_wait: while it keeps
// up it sleeps between arrivals, and its cost is paid from CPU the client
// has to spare (at 10,000 streams of 4 events/s on 2 CPUs it takes about a
// third of a CPU, and that run's stamps are the best of any mode). A thread
// busy nearly all the time is behind: arrivals queue up before it looks,
// and at its raised priority it takes its CPU from the reader first. The
// watch samples the observer's CPU every watchEvery and switches it off for
// the rest of the run (connections read on with kernel stamps, and the
// run's stamp metadata says when and why) once it was busy more than
// maxObserverBusy of the time for watchStrikes samples in a row. A client
// with one CPU never starts it (New).
var (
	watchEvery      = time.Second
	watchStrikes    = 2
	maxObserverBusy = 0.9
)

// startWatch starts the watch over s.obs; stopWatch ends it.
func (s *Source) startWatch() {
	s.startNs = clock.Mono()
	s.watchStop, s.watchDone = make(chan struct{}), make(chan struct{})
	go s.watch(s.obs)
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
func (s *Source) watch(o *observer) {
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
			busy := busyShare(cpu-lastCPU, now.Sub(lastAt))
			lastCPU, lastAt = cpu, now
			if busy <= maxObserverBusy {
				strikes = 0
				continue
			}
			if strikes++; strikes < watchStrikes {
				continue
			}
			why := fmt.Sprintf("it was busy %.0f%% of the time, more than %.0f%%, %d seconds running: it could not keep up with the arrivals",
				100*busy, 100*maxObserverBusy, watchStrikes)
			s.offWhy.Store(&why)
			s.offNs.Store(clock.Mono())
			o.stop()
			return
		}
	}
}

// busyShare is the fraction of wall time a thread that used cpuNs of CPU
// over it was running.
func busyShare(cpuNs int64, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return float64(cpuNs) / float64(wall)
}
