//go:build linux

package calibrate

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/trace"
)

// TestClientCPUsPinsEachSide runs a saturated step with the client pinned
// to one CPU and the child mock to the others: the report names each
// side's CPUs and GOMAXPROCS 1, the saturated step runs at one event per
// SaturatedITL per stream with every event joined, kernel-offset gives way
// to kernel stamps on one CPU (and the step says so), and afterwards the
// process has its CPUs and GOMAXPROCS back.
func TestClientCPUsPinsEachSide(t *testing.T) {
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil || was.Count() < 2 {
		t.Skipf("needs two CPUs to give each side one (affinity %d CPUs, %v)", was.Count(), err)
	}
	procs := runtime.GOMAXPROCS(0)
	cfg := Config{
		Streams: []int{}, Saturated: []int{8}, ClientCPUs: 1, Stamps: []string{trace.StampKernelOffset},
		Duration: 300 * time.Millisecond, MaxError: time.Second,
		Mode: ModeProcess, MockCommand: []string{os.Args[0]}, MockEnv: []string{childEnv + "=1"},
		Dir: t.TempDir(), Logf: t.Logf,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ClientCPUs) != 1 || len(rep.MockCPUs) != was.Count()-1 || slices.Contains(rep.MockCPUs, rep.ClientCPUs[0]) ||
		rep.GoMaxProcs != 1 || !strings.Contains(rep.Note, "pinned") {
		t.Errorf("client CPUs %v, mock CPUs %v, GOMAXPROCS %d, note %q", rep.ClientCPUs, rep.MockCPUs, rep.GoMaxProcs, rep.Note)
	}
	var now unix.CPUSet
	unix.SchedGetaffinity(0, &now)
	if now != was || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("after the run: %d CPUs (was %d), GOMAXPROCS %d (was %d)", now.Count(), was.Count(), runtime.GOMAXPROCS(0), procs)
	}
	var names []string
	for _, r := range rep.Steps {
		names = append(names, r.Name)
	}
	if want := []string{"probe/kernel-offset", "saturated=8/kernel-offset"}; !slices.Equal(names, want) {
		t.Fatalf("steps %v, want %v", names, want)
	}
	sat := rep.Steps[1]
	if sat.Step.Kind != KindSaturated || sat.Step.EventsPerS != 8/SaturatedITL.Seconds() || sat.Matched != sat.EventsServer || sat.Errors != 0 || sat.EventsServer == 0 {
		t.Errorf("saturated step %+v", sat)
	}
	// On one CPU: the packet tap, which has no CPU of its own, where this
	// process may open it; else kernel stamps, not an observer process.
	for _, r := range rep.Steps {
		tap := r.StampMode == trace.StampKernelOffset && r.StampObserver == trace.ObserverTap && r.StampNote == ""
		if !tap && (r.StampMode != trace.StampKernel || !strings.Contains(r.StampNote, "one CPU")) {
			t.Errorf("%s: stamps %s (observer %q, %s), want the packet tap or kernel on one CPU", r.Name, r.StampMode, r.StampObserver, r.StampNote)
		}
	}
}
