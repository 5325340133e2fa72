//go:build linux

package replay

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A background thread runs at nice 19, and the threads that run
// everything else do not.
func TestBackgroundThreadIsNice19(t *testing.T) {
	type class struct {
		policy uint32
		nice   int32
	}
	got := make(chan class, 1)
	go func() {
		backgroundThread()
		a, err := unix.SchedGetAttr(unix.Gettid(), 0)
		if err != nil {
			t.Errorf("sched_getattr: %v", err)
			got <- class{}
			return
		}
		got <- class{a.Policy, a.Nice}
	}()
	c := <-got
	if c.nice != 19 {
		t.Errorf("background thread: policy %d, nice %d; want nice 19", c.policy, c.nice)
	}
	a, err := unix.SchedGetAttr(unix.Gettid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Nice == 19 {
		t.Errorf("the test's own thread was lowered too: policy %d, nice %d", a.Policy, a.Nice)
	}
}
