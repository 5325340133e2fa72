package h1proxy

import (
	"sync"
	"sync/atomic"
	"time"
)

// watcher notices a client that goes away while its response is being
// forwarded, even while the upstream is silent (a long prefill): a
// goroutine per response waits for the client connection to become
// readable and, when it reads end of file or an error instead of a
// pipelined request, marks the client gone and calls abort, which makes
// the upstream side stop (closing its connection or canceling its
// request). It is owned by the response's forward: stop ends it (through
// a read deadline in the past) and waits for it.
type watcher struct {
	done     chan struct{}
	stopping atomic.Bool
	gone     atomic.Bool

	mu      sync.Mutex
	abortFn func()
	aborted bool
}

// aLongTimeAgo is a read deadline that has passed: it wakes the watcher.
var aLongTimeAgo = time.Unix(1, 0)

// start begins watching cc's client connection. The caller must not read
// cc.br until stop returns.
func (w *watcher) start(cc *clientConn, abort func()) {
	w.stopping.Store(false)
	w.gone.Store(false)
	w.mu.Lock()
	w.abortFn, w.aborted = abort, false
	w.mu.Unlock()
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		if _, err := cc.br.Peek(1); err == nil || w.stopping.Load() {
			return // a pipelined request (left buffered), or stop
		}
		w.gone.Store(true)
		w.abort()
	}()
}

// abort calls the abort function once.
func (w *watcher) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.aborted && w.abortFn != nil {
		w.aborted = true
		w.abortFn()
	}
}

// setAbort replaces the abort function (a retried upstream connection);
// if the client already went away, f is called at once.
func (w *watcher) setAbort(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.abortFn = f
	if w.aborted {
		f()
	}
}

// stop ends the watch and waits for its goroutine; it reports whether
// abort was called.
func (w *watcher) stop(cc *clientConn) bool {
	if w.done == nil {
		return false
	}
	w.stopping.Store(true)
	cc.c.SetReadDeadline(aLongTimeAgo)
	<-w.done
	cc.c.SetReadDeadline(time.Time{})
	w.done = nil
	w.mu.Lock()
	defer w.mu.Unlock()
	w.abortFn = nil
	return w.aborted
}
