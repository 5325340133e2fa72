//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
)

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
