//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// apartCPUs returns two CPUs this process may run on: one for a client
// child and one for the mock child it drives (taskset -c), so that the
// mock's CPU work does not delay the client's wake-ups on the same cores.
// It needs two CPUs and the taskset command.
func apartCPUs() (client, mock string, err error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return "", "", fmt.Errorf("pinning the client and the mock apart needs taskset (util-linux): %w", err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "", "", fmt.Errorf("reading this process's CPUs: %w", err)
	}
	var cpus []int
	for cpu := 0; cpu < 1024 && len(cpus) < 2; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) < 2 {
		return "", "", fmt.Errorf("pinning the client and the mock apart needs 2 CPUs; this process may run on %d", set.Count())
	}
	return strconv.Itoa(cpus[0]), strconv.Itoa(cpus[1]), nil
}

// cpuSeconds is the user and system CPU time process pid has used so far
// (/proc/PID/stat, in clock ticks of 1/100 s), 0 if it cannot be read.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state): utime and stime are fields 14 and 15
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	k, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (u + k) / 100
}
