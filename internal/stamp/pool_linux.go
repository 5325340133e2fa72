//go:build linux

package stamp

import (
	"strings"
	"sync"
	"time"
)

// observerLinger is how long an arrival observer outlives the run that
// started it, idle, so that the next run of this process (a sweep's next
// step, --repeat, a test binary's next replay) takes it over instead of
// starting a process of its own: a start is an exec and a runtime's
// start-up, a tenth of a second or more on a busy machine.
var observerLinger = 2 * time.Second

// observerPool keeps at most one idle observer. Its timer is its only
// goroutine: it stops the idle observer once it has lingered.
var observerPool struct {
	mu    sync.Mutex
	idle  *observer
	args  string // the arguments idle was started with
	timer *time.Timer
}

// acquireObserver returns an observer for a run: the idle one while it is
// alive and was started as this run would start one, else a new one.
func acquireObserver() (*observer, error) {
	if o, args := takeIdleObserver(); o != nil {
		if mainCalled.Load() && args == strings.Join(observerArgs, "\x00") && o.reusable() {
			return o, nil
		}
		o.stop()
	}
	return startObserver()
}

// takeIdleObserver takes the idle observer out of the pool, nil when none
// is, with the arguments it was started with.
func takeIdleObserver() (*observer, string) {
	p := &observerPool
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.idle
	if o != nil {
		p.idle = nil
		p.timer.Stop()
	}
	return o, p.args
}

// releaseObserver hands o back at the end of a run: it lingers idle for
// the next run, or stops when it cannot serve one (switched off, dead) or
// another observer is idle already.
func releaseObserver(o *observer) {
	if !o.reusable() || observerLinger <= 0 {
		o.stop()
		return
	}
	p := &observerPool
	p.mu.Lock()
	if p.idle != nil {
		p.mu.Unlock()
		o.stop()
		return
	}
	p.idle, p.args = o, strings.Join(observerArgs, "\x00")
	p.timer = time.AfterFunc(observerLinger, func() {
		p.mu.Lock()
		mine := p.idle == o
		if mine {
			p.idle = nil
		}
		p.mu.Unlock()
		if mine {
			o.stop()
		}
	})
	p.mu.Unlock()
}
