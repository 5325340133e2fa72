package calibrate

import (
	"sync"
	"time"

	"github.com/tracekit/tracekit/internal/clock"
)

// cpuEvery is how often a step samples the client's CPU, and
// maxCPUSamples bounds what it keeps: when full, every other sample goes
// and the interval doubles, so a long step keeps its whole span at a
// coarser grain.
const (
	cpuEvery      = 250 * time.Millisecond
	maxCPUSamples = 4096
)

// cpuSample is the client's CPU time (ns) at a clock.Mono reading.
type cpuSample struct{ at, cpu int64 }

// cpuSampler samples a CPU counter over a step, so that the CPU of a
// window known only after the step (the steady state, in server time)
// can be read off by interpolation.
type cpuSampler struct {
	read    func() int64
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []cpuSample
}

// startCPUSampler samples read now and then every cpuEvery until stop.
func startCPUSampler(read func() int64) *cpuSampler {
	s := &cpuSampler{read: read, done: make(chan struct{})}
	s.take()
	s.wg.Go(func() {
		every := cpuEvery
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if s.take() {
					every *= 2
					t.Reset(every)
				}
			}
		}
	})
	return s
}

// take adds a sample; it says whether it thinned the samples to half.
func (s *cpuSampler) take() bool {
	c := cpuSample{at: clock.Mono(), cpu: s.read()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, c)
	if len(s.samples) < maxCPUSamples {
		return false
	}
	n := 0
	for i := 0; i < len(s.samples); i += 2 {
		s.samples[n] = s.samples[i]
		n++
	}
	if last := s.samples[len(s.samples)-1]; s.samples[n-1] != last {
		s.samples[n] = last
		n++
	}
	s.samples = s.samples[:n]
	return true
}

// stop takes a last sample, ends sampling and returns the samples in
// time order. Safe on a nil sampler (nil samples).
func (s *cpuSampler) stop() []cpuSample {
	if s == nil {
		return nil
	}
	close(s.done)
	s.wg.Wait()
	s.take()
	return s.samples
}

// cpuAt is the CPU counter at mono time t, interpolated linearly between
// the samples around it; ok is false when t lies outside them.
func cpuAt(samples []cpuSample, t int64) (cpu float64, ok bool) {
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t < a.at || t > b.at {
			continue
		}
		if b.at == a.at {
			return float64(a.cpu), true
		}
		f := float64(t-a.at) / float64(b.at-a.at)
		return float64(a.cpu) + f*float64(b.cpu-a.cpu), true
	}
	return 0, false
}
