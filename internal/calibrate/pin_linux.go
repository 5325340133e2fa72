//go:build linux

package calibrate

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/tracekit/tracekit/internal/fielderr"
)

// pinning places the client (this process) on some CPUs and a child mock
// on the others, as `taskset` would: every thread of the process is set,
// and threads started later inherit the mask of the thread that started
// them. GOMAXPROCS follows the client's CPUs, as it would have had the
// process been started pinned.
type pinning struct {
	was, client, mock unix.CPUSet
	procs             int // GOMAXPROCS before
}

// pinClient pins this process to the first n CPUs it may run on, leaving
// the others for a child mock (needed with withMock).
func pinClient(n int, withMock bool) (*pinning, error) {
	p := &pinning{procs: runtime.GOMAXPROCS(0)}
	if err := unix.SchedGetaffinity(0, &p.was); err != nil {
		return nil, fmt.Errorf("reading this process's CPUs: %w", err)
	}
	have := p.was.Count()
	switch {
	case n >= have && withMock:
		return nil, fieldErr("ClientCPUs", "%s %d: this process may run on %d CPUs and the mock needs one of its own", fielderr.Name("ClientCPUs"), n, have)
	case n > have:
		return nil, fieldErr("ClientCPUs", "%s %d: this process may run on %d CPUs", fielderr.Name("ClientCPUs"), n, have)
	}
	for cpu, k := 0, 0; cpu < maxCPUs; cpu++ {
		if !p.was.IsSet(cpu) {
			continue
		}
		if k < n {
			p.client.Set(cpu)
		} else {
			p.mock.Set(cpu)
		}
		k++
	}
	if err := setTasks(os.Getpid(), &p.client); err != nil {
		p.restore()
		return nil, fmt.Errorf("pinning the client: %w", err)
	}
	runtime.GOMAXPROCS(n)
	return p, nil
}

// pinMock puts process pid (a child mock) on the CPUs the client left.
func (p *pinning) pinMock(pid int) error {
	if err := setTasks(pid, &p.mock); err != nil {
		return fmt.Errorf("pinning the mock: %w", err)
	}
	return nil
}

// restore gives this process back the CPUs and GOMAXPROCS it had.
func (p *pinning) restore() {
	setTasks(os.Getpid(), &p.was)
	runtime.GOMAXPROCS(p.procs)
}

// cpus lists the client's and the mock's CPUs, for the report.
func (p *pinning) cpus() (client, mock []int) {
	for cpu := 0; cpu < maxCPUs; cpu++ {
		if p.client.IsSet(cpu) {
			client = append(client, cpu)
		}
		if p.mock.IsSet(cpu) {
			mock = append(mock, cpu)
		}
	}
	return client, mock
}

// maxCPUs is the size of a CPU set (CPU_SETSIZE).
const maxCPUs = 1024

// setTasks sets the affinity of every thread of process pid.
func setTasks(pid int, set *unix.CPUSet) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH { // ESRCH: the thread ended
			return fmt.Errorf("thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}
