//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// apartCPUs gives two different CPUs of this process's set, and taskset
// with the first one starts a child that may run on that CPU only.
func TestApartCPUsPinsAChild(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	_, lookErr := exec.LookPath("taskset")
	client, mock, err := apartCPUs()
	if set.Count() < 2 || lookErr != nil {
		if err == nil {
			t.Fatalf("apartCPUs gave %s and %s with %d CPUs (taskset: %v), want an error", client, mock, set.Count(), lookErr)
		}
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if client == mock {
		t.Fatalf("client and mock both on CPU %s", client)
	}
	out, err := exec.Command("taskset", "-c", client, "grep", "Cpus_allowed_list", "/proc/self/status").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Cpus_allowed_list:")); got != client {
		t.Fatalf("the pinned child may run on CPUs %q, want %q", got, client)
	}
}
