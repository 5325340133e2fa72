//go:build linux

package replay

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A background thread runs at nice 19, in the idle class when asked, and
// the threads that run everything else do not.
func TestBackgroundThreadPriority(t *testing.T) {
	type class struct {
		policy uint32
		nice   int32
	}
	for _, idle := range []bool{false, true} {
		got := make(chan class, 1)
		go func() {
			backgroundThread(idle)
			a, err := unix.SchedGetAttr(unix.Gettid(), 0)
			if err != nil {
				t.Errorf("sched_getattr: %v", err)
				got <- class{}
				return
			}
			got <- class{a.Policy, a.Nice}
		}()
		c := <-got
		want := class{0, 19} // SCHED_OTHER
		if idle {
			want.policy = schedIdle
		}
		if c != want {
			t.Errorf("background thread (idle %v): policy %d, nice %d; want policy %d, nice 19", idle, c.policy, c.nice, want.policy)
		}
		a, err := unix.SchedGetAttr(unix.Gettid(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if a.Nice == 19 || a.Policy == schedIdle {
			t.Errorf("the test's own thread was lowered too: policy %d, nice %d", a.Policy, a.Nice)
		}
	}
}
