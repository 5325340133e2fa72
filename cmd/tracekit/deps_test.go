package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The tracekit binary does not link package testing (test helpers live in
// _test files and in packages only tests import, such as mocktest): the
// go command lists what the binary imports, and no package of it may
// import testing.
func TestBinaryLinksNoTesting(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // hang guard, not a budget
	defer cancel()
	out, err := exec.CommandContext(ctx, gobin, "list", "-deps", "-f", "{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		pkgs++
		if pkg == "testing" {
			continue // named by its importer below
		}
		for imp := range strings.FieldsSeq(imports) {
			if imp == "testing" {
				t.Errorf("%s, linked into tracekit, imports testing", pkg)
			}
		}
	}
	if pkgs < 50 { // the binary's own packages and the standard library's: the listing is real
		t.Fatalf("go list named %d packages:\n%s", pkgs, out)
	}
}
