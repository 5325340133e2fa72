package stamp

// batcher is the rule by which the client's poller decides, after each
// wake-up, whether to sleep a little before it waits again, so that under
// load one wake-up serves the arrivals of that time together. A wake-up
// costs two context switches at least, more than everything else an
// arrival costs; sleeping is worth it only when edges come often and from
// many sockets. A few fast streams are read at once instead, so that
// their close events are not read together. (The arrival observer never
// sleeps: telling close events apart is its job.)
//
// Over each window of batchWindow ns, the loop batches in the next
// window when, in this one,
//
//	edges > rate * window length in seconds, and
//	distinct sockets with an edge >= streams.
type batcher struct {
	rate    int // edges a second
	streams int

	start  int64  // the window's start (clock.Mono ns); 0: not begun
	edges  int    // edges seen in the window
	seen   int    // distinct sockets with an edge in the window
	window uint32 // the window's number, from 1
	on     bool   // batching in this window
}

// batchWindow is the length of the windows the edge rate is judged over.
const batchWindow = 20e6 // 20 ms

// newBatcher batches above rate edges a second from at least streams
// sockets.
func newBatcher(rate, streams int) batcher { return batcher{rate: rate, streams: streams, window: 1} }

// socket counts a socket with an edge; last is where the socket keeps
// the window it was last counted in.
func (b *batcher) socket(last *uint32) {
	if *last != b.window {
		*last = b.window
		b.seen++
	}
}

// woke ends a wake-up that handed out n edges at now (clock.Mono ns) and
// reports whether the loop sleeps before it waits again: batching is on
// and the wake-up did not fill the loop's buffer (full, more are waiting
// already).
func (b *batcher) woke(n int, full bool, now int64) bool {
	if b.start == 0 {
		b.start = now
	}
	b.edges += n
	if el := now - b.start; el >= batchWindow {
		b.on = float64(b.edges) > float64(b.rate)*float64(el)/1e9 && b.seen >= b.streams
		b.start, b.edges, b.seen = now, 0, 0
		b.window++
	}
	return b.on && !full
}
