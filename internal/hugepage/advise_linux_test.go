//go:build linux

package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// A large array Grow makes is advised: the kernel's mapping that holds
// its whole huge pages carries the huge-page flag ("hg" in smaps'
// VmFlags), whatever the system's setting, which decides only whether
// faults there then map huge pages.
func TestGrowAdvises(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages")
	}
	g := Grow([]int64(nil), 4*Size/8)
	start, length := whole(uintptr(unsafe.Pointer(unsafe.SliceData(g))), uintptr(cap(g))*8)
	if length == 0 {
		t.Fatalf("an array of %d bytes holds no whole huge page", cap(g)*8)
	}
	flags, err := vmFlags(start)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the mapping at %#x has VmFlags %q, want hg among them", start, flags)
	}
	runtime.KeepAlive(g) // the array stays mapped as it was checked
}

// vmFlags is the VmFlags line of the mapping of this process that holds
// addr (/proc/self/smaps).
func vmFlags(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no mapping holds %#x", addr)
}
