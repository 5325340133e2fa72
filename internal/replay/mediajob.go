package replay

import (
	"sync"
	"sync/atomic"

	"github.com/tracekit/tracekit/trace"
)

// mediaJob is one conversation's media items to make or load: taken in
// order by low-priority workers (work), and by the dispatcher itself when
// it has to wait for them (help). Each item is published once, by the
// first to finish it; done closes when all are.
//
// help exists because a worker's low priority is what puts the dispatcher
// first on a busy machine, and also what can starve the worker there: a
// thread at nice 19 beside busy processes gets a few hundredths of a CPU
// (the idle class less), and an item that takes a few milliseconds then
// takes seconds. Once the dispatcher waits for it, the item is on the
// critical path, so it is made at the dispatcher's priority, again if a
// worker is already on it; the worker's copy is dropped at its next step.
type mediaJob struct {
	items []mediaTodo
	// specs are copies of the items' descriptions: the makers read these
	// while a publisher writes the items' Data, URL and Base64.
	specs     []trace.Media
	published []atomic.Bool
	next      atomic.Int64 // the next item no one has taken
	left      atomic.Int64 // items not published yet
	done      chan struct{}
	urls      *mediaServer
	store     *trace.MediaStore

	mu    sync.Mutex // guards first and total
	first error
	total int // bytes made: each item's and its base64's
}

func newMediaJob(items []mediaTodo, urls *mediaServer, store *trace.MediaStore) *mediaJob {
	j := &mediaJob{items: items, specs: make([]trace.Media, len(items)), published: make([]atomic.Bool, len(items)),
		done: make(chan struct{}), urls: urls, store: store}
	for i := range items {
		j.specs[i] = *items[i].it
	}
	j.left.Store(int64(len(items)))
	return j
}

// abandoned is the panic with which a worker leaves an item someone else
// published (see work).
type abandoned struct{}

// finished reports whether every item is published.
func (j *mediaJob) finished() bool { return j.left.Load() == 0 }

// take returns the next item no one has taken, -1 when none is left.
func (j *mediaJob) take() int {
	if i := int(j.next.Add(1)) - 1; i < len(j.items) {
		return i
	}
	return -1
}

// work makes items until none is left to take, on a thread of the lowest
// priority (backgroundThread; idle: the idle class), calling pause between
// steps. Once every item is published, the item under way is dropped at
// its next step.
func (j *mediaJob) work(idle bool, pause func()) {
	backgroundThread(idle) // lowprio_linux.go: the dispatcher and the reads come first
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(abandoned); !ok {
				panic(r)
			}
		}
	}()
	step := func() {
		if j.finished() {
			panic(abandoned{})
		}
		pause()
	}
	sp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(sp)
	for i := j.take(); i >= 0; i = j.take() {
		j.makeOne(i, sp, step)
	}
}

// help makes, on the calling goroutine and at its priority, the items no
// worker has taken, then those taken but not yet published, and returns
// when all are published (by it or by a worker).
func (j *mediaJob) help() {
	sp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(sp)
	nop := func() {}
	for i := j.take(); i >= 0; i = j.take() {
		j.makeOne(i, sp, nop)
	}
	for i := range j.items {
		if !j.published[i].Load() {
			j.makeOne(i, sp, nop)
		}
	}
}

// makeOne makes item i in *sp (kept for the next when it grew) and
// publishes it, with its base64 when its request carries it so.
func (j *mediaJob) makeOne(i int, sp *[]byte, step func()) {
	spec := &j.specs[i]
	step()
	b, err := itemBytes((*sp)[:0], spec, j.store, step)
	if err != nil {
		j.publish(i, "", "", err)
		return
	}
	if spec.Hash == "" {
		*sp = b[:0]
	}
	data, b64 := string(b), ""
	if j.urls == nil && j.items[i].base64 {
		step()
		b64 = base64String(b)
	}
	j.publish(i, data, b64, nil)
}

// publish sets item i's bytes, or records its error, unless it was
// published already.
func (j *mediaJob) publish(i int, data, b64 string, err error) {
	if !j.published[i].CompareAndSwap(false, true) {
		return
	}
	j.mu.Lock()
	if err != nil {
		if j.first == nil {
			j.first = err
		}
	} else {
		it := j.items[i].it
		it.Data, it.Base64 = data, b64
		if j.urls != nil {
			it.URL = j.urls.put(it, data)
		}
		j.total += len(data) + len(b64)
	}
	j.mu.Unlock()
	if j.left.Add(-1) == 0 {
		close(j.done)
	}
}

// result is the bytes made and the first item's error. Call it after done.
func (j *mediaJob) result() (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.total, j.first
}
