package stamp

import "testing"

// TestBatcher drives the rule with made-up times: it batches in the
// window after one with more than rate edges a second from at least
// streams sockets, never while the loop's buffer came back full, and
// stops again once the edges slow down or come from fewer sockets.
func TestBatcher(t *testing.T) {
	const ms = int64(1e6)
	b := newBatcher(1000, 3) // > 20 edges per 20 ms window, from 3 sockets or more
	socks := make([]uint32, 4)
	now := int64(5 * ms)
	b.woke(0, false, now) // the first window starts
	// phase runs wakes, one every gap ms, each with one edge from each of
	// the first k sockets, until a window was judged (20 ms), and returns
	// what the judging wake-up (the last) said.
	phase := func(k int, gap int64, fullFirst bool) bool {
		var sleep bool
		for i := int64(0); i < 20; i += gap {
			for j := range k {
				b.socket(&socks[j])
			}
			now += gap * ms
			sleep = b.woke(k, fullFirst && i == 0, now)
			if fullFirst && i == 0 && sleep {
				t.Fatal("slept though the buffer came back full")
			}
		}
		return sleep
	}
	if !phase(4, 1, false) {
		t.Fatal("no batching after a window of 4,000 edges a second from 4 sockets")
	}
	if phase(2, 1, true) {
		t.Fatal("batching after a window with edges from 2 sockets (3 needed)")
	}
	if !phase(3, 1, false) {
		t.Fatal("no batching after a window of 3,000 edges a second from 3 sockets")
	}
	if phase(4, 4, false) {
		t.Fatal("batching at the threshold rate (4 edges every 4 ms: 1,000 a second)")
	}
}
