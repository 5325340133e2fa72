//go:build !linux

package main

import "errors"

// apartCPUs needs Linux (sched_getaffinity and taskset).
func apartCPUs() (client, mock string, err error) {
	return "", "", errors.New("pinning the client and the mock apart needs Linux")
}

// cpuSeconds needs Linux's /proc: 0.
func cpuSeconds(pid int) float64 { return 0 }
